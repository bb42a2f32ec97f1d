"""Tests for inference.chains: vmapped chains, warm-up, thinning, interruption, capacity growth.

Every run uses one small problem and the collapsed kernel, so the jitted calls are compiled a
few times and reused across tests.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from inference import chains, neal
from inference.chains import CapacityError, sample_chains, stack_states
from zoo.dirichlet.families import normal_gamma

FAMILY = normal_gamma(1, kappa=0.2)
DATA = np.array([[-6.0], [-6.3], [0.1], [-0.2], [6.2], [5.9]], dtype=np.float32)
STEP = neal.build_kernel(FAMILY, "collapsed")
N_CHAINS = 3


def initial_states(max_clusters: int = 6, alpha: float = 1.0):
    return stack_states(
        [
            neal.init(jax.random.key(chain), DATA, FAMILY, algorithm="collapsed", max_clusters=max_clusters,
                      alpha=alpha)
            for chain in range(N_CHAINS)
        ]
    )


def run(key=0, states=None, **options):
    settings = dict(n_warmup=0, n_draws=8, draws_per_call=4, progress=False)
    settings.update(options)
    return sample_chains(jax.random.key(key), STEP, initial_states() if states is None else states, DATA, **settings)


def test_shapes_and_same_key_same_chains():
    first, second, other = run(), run(), run(key=1)
    assert first.samples["assignments"].shape == (N_CHAINS, 8, len(DATA))
    for name in ("alpha", "n_clusters", "log_joint"):
        assert first.samples[name].shape == (N_CHAINS, 8)
    assert first.completed and first.n_draws == 8 and first.n_chains == N_CHAINS
    for name in first.samples:
        np.testing.assert_array_equal(first.samples[name], second.samples[name])
    assert not np.array_equal(first.samples["log_joint"], other.samples["log_joint"])
    # Chains differ from one another.
    assert not np.array_equal(first.samples["log_joint"][0], first.samples["log_joint"][1])


def test_draws_do_not_depend_on_the_call_size_and_thinning_keeps_every_kth():
    reference = run(draws_per_call=4)
    in_one_call = run(draws_per_call=8, progress=True)
    np.testing.assert_array_equal(reference.samples["assignments"], in_one_call.samples["assignments"])
    thinned = run(n_draws=4, thin=2)
    np.testing.assert_array_equal(thinned.samples["assignments"], reference.samples["assignments"][:, 1::2])
    assert thinned.thin == 2
    warmed = run(n_warmup=4, n_draws=4)
    np.testing.assert_array_equal(warmed.samples["log_joint"], reference.samples["log_joint"][:, 4:])
    assert warmed.n_warmup == 4


def test_time_budget_returns_finished_draws():
    result = run(time_budget=1e-9)
    assert not result.completed and result.stopped_by == "time_budget"
    assert result.n_draws == 4
    assert run().stopped_by == "n_draws"
    np.testing.assert_array_equal(result.samples["assignments"], run().samples["assignments"][:, :4])


def test_keyboard_interrupt_returns_finished_draws(monkeypatch):
    original = chains._run_calls_jit
    calls = []

    def interrupted_on_second_call(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(chains, "_run_calls_jit", interrupted_on_second_call)
    result = run()
    assert not result.completed and result.n_draws == 4 and result.stopped_by == "interrupted"
    assert "stopped early by Ctrl-C" in repr(result)  # its card says which stopped it
    monkeypatch.setattr(chains, "_run_calls_jit", original)
    np.testing.assert_array_equal(result.samples["n_clusters"], run().samples["n_clusters"][:, :4])


def test_ctrl_c_in_a_call_keeps_that_call_and_a_second_drops_it(monkeypatch):
    """SIGINT, as a user's Ctrl-C, during the second of three calls: the call finishes and its draws are
    kept (until 2026-12-07 one process dropped it); a second SIGINT drops the call in flight."""
    import signal

    original = chains._run_calls_jit
    for n_signals in (1, 2):
        calls = []

        def ctrl_c_in_the_second_call(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                for _ in range(n_signals):
                    signal.raise_signal(signal.SIGINT)
            return original(*args, **kwargs)

        monkeypatch.setattr(chains, "_run_calls_jit", ctrl_c_in_the_second_call)
        result = run(n_draws=12)
        assert not result.completed and result.stopped_by == "interrupted"
        assert result.n_draws == {1: 8, 2: 4}[n_signals]
        monkeypatch.setattr(chains, "_run_calls_jit", original)
        np.testing.assert_array_equal(result.samples["n_clusters"], run().samples["n_clusters"][:, :result.n_draws])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back


def test_overflow_grows_capacity_and_continues_the_same_chains():
    small = run(states=initial_states(max_clusters=3, alpha=8.0))
    large = run(states=initial_states(max_clusters=6, alpha=8.0))
    assert small.final_state.max_clusters == 6
    assert np.any(large.samples["n_clusters"] > 3), "the test needs a chain that exceeds 3 clusters"
    np.testing.assert_array_equal(small.samples["assignments"], large.samples["assignments"])
    np.testing.assert_allclose(small.samples["log_joint"], large.samples["log_joint"], rtol=1e-6)
    with pytest.raises(CapacityError, match="max_clusters=3"):
        run(states=initial_states(max_clusters=3, alpha=8.0), on_overflow="raise")


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="^n_draws"):
        run(n_draws=0)
    with pytest.raises(ValueError, match="^thin"):
        run(thin=0)
    with pytest.raises(ValueError, match="^draws_per_call"):
        run(draws_per_call=0)
    with pytest.raises(ValueError, match="^time_budget"):
        run(time_budget=-1.0)
    with pytest.raises(ValueError, match="^on_overflow"):
        run(on_overflow="ignore")
    with pytest.raises(ValueError, match="^n_warmup"):
        run(n_warmup=-1)
    with pytest.raises(TypeError, match="^step"):
        sample_chains(jax.random.key(0), "step", initial_states(), DATA)
    with pytest.raises(TypeError, match="^stop_when"):
        run(stop_when=True)
    with pytest.raises(TypeError, match="^stop_when"):
        chains.continue_chains(jax.random.key(0), STEP, run(), DATA, n_draws=4, stop_when="mixed")
    single = neal.init(jax.random.key(0), DATA, FAMILY, algorithm="collapsed", max_clusters=6, alpha=1.0)
    with pytest.raises(ValueError, match="^init_states"):
        sample_chains(jax.random.key(0), STEP, single, DATA)
    flagged = initial_states()._replace(overflow=np.ones(N_CHAINS, bool))
    with pytest.raises(ValueError, match="^init_states: the overflow flag"):
        sample_chains(jax.random.key(0), STEP, flagged, DATA)


def test_stop_when_is_asked_as_the_draws_grow_by_a_tenth_and_ends_the_run_where_it_says():
    asked = []

    def enough_after_30(so_far):
        asked.append(so_far.n_draws)
        assert so_far.samples["assignments"].shape[:2] == (N_CHAINS, so_far.n_draws)
        return so_far.n_draws >= 30

    stopped = run(n_draws=400, draws_per_call=2, stop_when=enough_after_30)
    # Asked from STOP_CHECK_MIN_DRAWS on, each time the draws have grown by STOP_CHECK_GROWTH.
    assert asked == [20, 22, 26, 30]
    assert stopped.completed and stopped.n_draws == 30 and stopped.next_sweep == 30
    # The draws do not depend on it, and the chains go on as one longer run.
    whole = run(n_draws=40, draws_per_call=2)
    for name in whole.samples:
        np.testing.assert_array_equal(stopped.samples[name], whole.samples[name][:, :30])
    more = chains.continue_chains(jax.random.key(0), STEP, stopped, DATA, n_draws=10, draws_per_call=2)
    for name in whole.samples:
        np.testing.assert_array_equal(more.samples[name], whole.samples[name])
    # Never asked when it cannot end the run early, and a rule that never holds leaves it whole.
    asked.clear()
    assert run(n_draws=20, draws_per_call=4, stop_when=enough_after_30).n_draws == 20 and asked == []
    assert run(n_draws=40, draws_per_call=4, stop_when=lambda so_far: False).n_draws == 40


def test_continued_chains_ask_stop_when_about_both_runs():
    first = run(n_draws=40, draws_per_call=4)
    asked = []

    def enough_at_52(so_far):
        asked.append(so_far.n_draws)
        return so_far.n_draws >= 52

    more = chains.continue_chains(jax.random.key(0), STEP, first, DATA, n_draws=100, draws_per_call=4,
                                  stop_when=enough_at_52)
    # The total grows by a tenth between questions: 44, then 49 (asked at 52: calls of 4).
    assert asked == [44, 52] and more.n_draws == 52 and more.completed
    np.testing.assert_array_equal(more.samples["log_joint"][:, :40], first.samples["log_joint"])
