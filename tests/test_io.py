"""Saving and loading: EM results round-trip to equal results, fits resume, chains keep settings."""

import dataclasses
import json
import re
import types
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from inference.em import EMResult, tempered_em
from inference.enumerated import EnumeratedEM, ProgramData
from inference.schedules import FixedBeta, TemperedEM
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect
from zoo.finite_mixture import GaussianMixture, gaussian_mixture_program
from zoo.io import (
    chains_settings,
    decode_settings,
    encode_settings,
    load_chains,
    load_result,
    read_metadata,
    save_chains,
    save_result,
)

RNG = np.random.default_rng(0)
COUNTS = CoOccurrence.from_dense(RNG.poisson(1.5, size=(25, 9)))
TRAIN, VALID = COUNTS.split_tokens([0.8, 0.2], rng=1)


def assert_results_equal(loaded: EMResult, original: EMResult) -> None:
    assert loaded.model == original.model
    assert type(loaded.params) is type(original.params)
    for name in (original.params._fields if hasattr(original.params, "_fields") else original.params):
        saved = loaded.params[name] if isinstance(loaded.params, dict) else getattr(loaded.params, name)
        kept = original.params[name] if isinstance(original.params, dict) else getattr(original.params, name)
        assert saved.dtype == kept.dtype
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(kept))
    assert loaded.history.keys() == original.history.keys()
    for name in original.history:
        np.testing.assert_array_equal(loaded.history[name], original.history[name])
    np.testing.assert_array_equal(loaded.restart_scores, original.restart_scores)
    for field in ("beta", "best_restart", "n_iter", "converged", "best_iteration", "stopped_by", "log_lik", "_shape",
                  "schedule"):
        assert getattr(loaded, field) == getattr(original, field), field


@pytest.fixture(scope="module")
def tempered_aspect():
    return tempered_em(Aspect(3, backend="xla"), TRAIN, key=jax.random.key(0), valid=VALID, n_restarts=2,
                       max_iter=80)


def test_aspect_result_round_trips_and_its_methods_work(tmp_path, tempered_aspect):
    path = save_result(tmp_path / "aspect", tempered_aspect, schedule=TemperedEM(), settings={"note": "test", "k": [3]})
    assert path.name == "aspect.npz"
    loaded = load_result(path)
    assert loaded.provenance == tempered_aspect.provenance and loaded.provenance["host_cpu"]  # what made the fit, kept
    assert_results_equal(loaded, tempered_aspect)
    assert loaded.perplexity(VALID) == tempered_aspect.perplexity(VALID)
    assert loaded.log_likelihood(TRAIN) == tempered_aspect.log_likelihood(TRAIN)
    assert loaded.history_dataset().sizes["iteration"] == tempered_aspect.n_iter
    metadata = read_metadata(path)
    assert metadata["schedule"] == TemperedEM()
    assert metadata["settings"] == {"note": "test", "k": [3]}
    # The schedule the fit ran is the result's own, on its card, and saved without being named.
    assert tempered_aspect.schedule == TemperedEM() and "schedule          TemperedEM(" in str(tempered_aspect)
    assert load_result(save_result(tmp_path / "unnamed", tempered_aspect)).schedule == TemperedEM()


def test_resumed_fit_equals_an_uninterrupted_one(tmp_path):
    model, key = Aspect(2, backend="xla"), jax.random.key(3)
    # tol = 0 never stops early, so 2 x 15 iterations are 30 iterations of the same EM map.
    whole = tempered_em(model, COUNTS, key=key, max_iter=30, tol=0.0)
    first = tempered_em(model, COUNTS, key=key, max_iter=15, tol=0.0)
    loaded = load_result(save_result(tmp_path / "half.npz", first, schedule=FixedBeta(1.0)))
    resumed = tempered_em(loaded.model, COUNTS, key=key, init=loaded.params, max_iter=15, tol=0.0,
                          schedule=read_metadata(tmp_path / "half.npz")["schedule"])
    for a, b in zip(resumed.params, whole.params):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(resumed.history["log_lik"], whole.history["log_lik"][15:], rtol=1e-6)


def test_float64_gaussian_mixture_round_trips(tmp_path, x64):
    points = np.concatenate([RNG.normal(-3.0, 1.0, size=(20, 2)), RNG.normal(3.0, 1.0, size=(20, 2))])
    result = tempered_em(GaussianMixture(2, variance_floor=1e-3), points, key=jax.random.key(1), max_iter=50)
    assert result.params.locs.dtype == jnp.float64
    loaded = load_result(save_result(tmp_path / "mixture.npz", result))
    assert_results_equal(loaded, result)
    assert loaded.log_likelihood(points) == result.log_likelihood(points)


POINTS = np.concatenate([np.full((10, 1), -2.0), np.full((10, 1), 2.0)]) + RNG.normal(size=(20, 1)) * 0.1


def _program_fit(program):
    model = EnumeratedEM(program, static_kwargs=(("n_classes", 2),), m_step_iters=5)
    return tempered_em(model, ProgramData((jnp.asarray(POINTS),), 20.0), key=jax.random.key(2), max_iter=3)


def test_generic_em_with_a_program_round_trips(tmp_path):
    result = _program_fit(gaussian_mixture_program)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a program of a module that can be imported: saved without a word
        loaded = load_result(save_result(tmp_path / "program.npz", result))
    assert loaded.model.program is gaussian_mixture_program
    assert_results_equal(loaded, result)


def _defined_as(module, qualname, function=gaussian_mixture_program):
    """A copy of ``function`` that says it was defined as ``module:qualname``. With ``__main__`` and
    a name this process's ``__main__`` (pytest's) does not have, it is to this process what a
    program of a script or notebook is to every other process: named in the file, not found."""
    copy = types.FunctionType(function.__code__, function.__globals__, qualname.rpartition(".")[2],
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__module__, copy.__qualname__ = module, qualname
    return copy


def _same_fit(loaded, original):
    """The parameters, history and scores of ``original`` in ``loaded``, whose model is another
    object (given to load_result), equal to the original's but for its program."""
    assert_results_equal(loaded, dataclasses.replace(original, model=loaded.model))


def test_a_program_of_a_script_warns_when_saved_and_loads_with_the_model_given(tmp_path):
    # 2026-12-07: a fit of an EnumeratedEM whose program a script defined (module __main__) was saved
    # without a word, and neither load_result nor read_metadata could read the file in another process.
    program = _defined_as("__main__", "latentzoo_test_program_of_a_script")
    assert not hasattr(__import__("__main__"), program.__qualname__)
    result = _program_fit(program)
    with pytest.warns(UserWarning, match=r"^save_result: the model refers to '__main__:latentzoo_test_program_of_a_"
                                         r"script', defined in a script or notebook .* another process cannot import: "
                                         r".* load_result\(path, model=model\) .* put the program .* in a module that "
                                         r"can be imported"):
        path = save_result(tmp_path / "script.npz", result)
    # In another process, trusting __main__ or not, the model is not there to import: load_result says
    # how to load the file all the same.
    with pytest.raises(ValueError, match=r"^path: '.*script.npz': model.program: cannot find '__main__:latentzoo_"
                                         r"test_program_of_a_script' .* load_result\(path, model=model\)"):
        load_result(path, trusted_modules=("__main__",))
    with pytest.raises(ValueError, match=r"^path: .*model.program: refusing to import '__main__'.* "
                                         r"load_result\(path, model=model\)"):
        load_result(path)
    # The metadata read without importing the model: described, its program by name.
    described = {"class": "inference.enumerated:EnumeratedEM", "program": "__main__:latentzoo_test_program_of_a_script",
                 "static_kwargs": (("n_classes", 2),), "max_plate_nesting": 1, "learning_rate": 0.05,
                 "m_step_iters": 5, "init_scale": 0.1, "data_plate": None, "data_args": None}
    for trusted_modules in ((), ("__main__",)):
        metadata = read_metadata(path, trusted_modules=trusted_modules)
        assert metadata["model"] == described
        assert metadata["schedule"] == result.schedule and metadata["n_iter"] == result.n_iter
    # The parameters and history with the model given: its program defined again (here: imported).
    again = EnumeratedEM(gaussian_mixture_program, static_kwargs={"n_classes": 2}, m_step_iters=5)
    loaded = load_result(path, model=again)
    assert loaded.model is again
    _same_fit(loaded, result)
    assert loaded.perplexity(POINTS) == result.perplexity(POINTS)
    # Only the saved model: the same class and settings, whatever its program.
    with pytest.raises(ValueError, match=r"^model: the EnumeratedEM given differs from the model saved in '.*script"
                                         r".npz' in static_kwargs, m_step_iters: the saved one has static_kwargs="
                                         r"\(\('n_classes', 2\),\), m_step_iters=5$"):
        load_result(path, model=EnumeratedEM(gaussian_mixture_program, static_kwargs={"n_classes": 3}))
    with pytest.raises(ValueError, match=r"^model: the Aspect given is not the model saved in '.*', one of class "
                                         r"'inference.enumerated:EnumeratedEM'"):
        load_result(path, model=Aspect(2))
    with pytest.raises(TypeError, match="^model: expected the model fitted by EM whose result .* got function"):
        load_result(path, model=gaussian_mixture_program)


def test_a_local_program_is_saved_with_a_warning_and_loads_with_the_model_given(tmp_path):
    # A lambda or a function defined inside a function: no process can import it. Saving it raised a
    # TypeError, and the fit was lost; it is saved now, with the warning.
    def program(points=None, *, n_classes, n_points=None, n_features=None):
        return gaussian_mixture_program(points, n_classes=n_classes, n_points=n_points, n_features=n_features)

    reference = f"{program.__module__}:{program.__qualname__}"
    result = _program_fit(program)
    with pytest.warns(UserWarning, match=rf"^save_result: the model refers to {re.escape(repr(reference))}, a lambda "
                                         r"or a function defined inside another function, which another process "
                                         r"cannot import: .*load_result\(path, model=model\)"):
        path = save_result(tmp_path / "local.npz", result)
    with pytest.raises(ValueError, match=rf"^path: .*cannot find {re.escape(repr(reference))}.*model=model"):
        load_result(path, trusted_modules=(program.__module__,))
    assert read_metadata(path)["model"]["program"] == reference
    _same_fit(load_result(path, model=result.model), result)
    assert load_result(path, model=result.model).model == result.model


def test_a_model_class_of_a_script_loads_with_the_model_given(tmp_path, tempered_aspect):
    # A model class defined in a script (and the class of its parameters), moved to a module later
    # or defined again: the model given is the saved one by its classes' names and its settings.
    script_aspect = type("Aspect", (Aspect,), {"__module__": "__main__", "__qualname__": "Aspect"})
    result = dataclasses.replace(tempered_aspect, model=script_aspect(3, backend="xla"))
    with pytest.warns(UserWarning, match=r"^save_result: the model refers to '__main__:Aspect', defined in a script"):
        path = save_result(tmp_path / "script_class.npz", result)
    # The parameters' class in __main__ too: looked up beside the class of the model given.
    path = _rewritten(path, tmp_path / "script_params.npz",
                      lambda metadata, arrays: metadata["params"].update(namedtuple="__main__:AspectParams"))
    with pytest.raises(ValueError, match=r"^path: .*model: cannot find '__main__:Aspect'.*model=model"):
        load_result(path, trusted_modules=("__main__",))
    assert read_metadata(path)["model"] == {"class": "__main__:Aspect", "n_classes": 3, "update": "simultaneous",
                                            "backend": "xla", "prior_count": 0.0}
    loaded = load_result(path, model=Aspect(3, backend="xla"))
    assert_results_equal(loaded, tempered_aspect)
    assert loaded.perplexity(VALID) == tempered_aspect.perplexity(VALID)
    with pytest.raises(ValueError, match=r"^model: the Aspect given differs from the model saved in .* in n_classes"):
        load_result(path, model=Aspect(2, backend="xla"))


@dataclasses.dataclass(frozen=True)
class _Untrusted:
    size: int = 3


def test_only_trusted_modules_are_imported(tmp_path, tempered_aspect):
    document = encode_settings(_Untrusted(5))
    with pytest.raises(ValueError, match="^model: refusing to import"):
        decode_settings(document)
    assert decode_settings(document, trusted_modules=(_Untrusted.__module__,)) == _Untrusted(5)
    forged = {"dataclass": "os:system", "fields": {}}
    with pytest.raises(ValueError, match="^model: refusing to import 'os'"):
        decode_settings(forged)


def test_settings_encoding_round_trips_special_values():
    values = {"inf": float("inf"), "tuple": (1, (2.5, None)), "list": [True, "a"], "int": np.int64(4)}
    decoded = decode_settings(json.loads(json.dumps(encode_settings(values, "settings"))), "settings")
    assert decoded == {"inf": float("inf"), "tuple": (1, (2.5, None)), "list": [True, "a"], "int": 4}
    with pytest.raises(TypeError, match="^settings.bad: cannot save"):
        encode_settings({"bad": object()}, "settings")
    with pytest.raises(TypeError, match="^model: cannot save"):
        encode_settings(lambda x: x)


def test_bad_files_and_arguments_are_named(tmp_path, tempered_aspect):
    with pytest.raises(TypeError, match="^result:"):
        save_result(tmp_path / "x.npz", {"params": 1})
    with pytest.raises(TypeError, match="^settings:"):
        save_result(tmp_path / "x.npz", tempered_aspect, settings=[1])
    with pytest.raises(FileNotFoundError, match="^path:"):
        load_result(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(ValueError, match="^path:"):
        load_result(tmp_path / "text.npz")
    np.savez(tmp_path / "plain.npz", values=np.arange(3))
    with pytest.raises(ValueError, match="^path: .* no metadata"):
        load_result(tmp_path / "plain.npz")
    np.savez(tmp_path / "other.npz", metadata=np.asarray(json.dumps({"format": "something else"})))
    with pytest.raises(ValueError, match="^path: .* not a latentzoo result"):
        load_result(tmp_path / "other.npz")
    with pytest.raises(TypeError, match="^path:"):
        load_result(3)
    # save_result appends .npz to a name without it; load_result finds it under the same name.
    written = save_result(tmp_path / "plain_name", tempered_aspect)
    assert written.name == "plain_name.npz" and load_result(tmp_path / "plain_name").n_iter == tempered_aspect.n_iter
    # A folder given for the file: named, not written beside it as "<folder>.npz".
    with pytest.raises(ValueError, match=r"^path: '.*' is a folder; give a file name in it, such as '.*result.npz'"):
        save_result(tmp_path, tempered_aspect)
    assert not tmp_path.with_name(tmp_path.name + ".npz").exists()
    with pytest.raises(ValueError, match=r"^path: '.*' is a folder; .*chains.nc"):
        save_chains(tmp_path, az.from_dict(posterior={"alpha": np.ones((2, 3))}))


class _DrawsFit:
    idata = None  # a DP mixture's fit: its InferenceData holds every draw


class _Chains:
    def to_inference_data(self):
        return None


def test_gibbs_results_are_refused_naming_how_their_chains_are_saved(tmp_path):
    with pytest.raises(TypeError, match=r"^result: .*, got _DrawsFit: Gibbs chains, whose draws "
                                        r"zoo.io.save_chains\(path, result.idata\) saves"):
        save_result(tmp_path / "x.npz", _DrawsFit())
    with pytest.raises(TypeError, match=r"^result: .*, got _Chains: Gibbs chains, whose draws "
                                        r"zoo.io.save_chains\(path, result.to_inference_data\(\)\) saves"):
        save_result(tmp_path / "x.npz", _Chains())
    with pytest.raises(TypeError, match=r"^result: .*, got dict$"):
        save_result(tmp_path / "x.npz", {"params": 1})


@pytest.fixture(scope="module")
def ratings_lrm():
    """An LRM of two domains (users and films) with a class count of each, and its data."""
    from zoo.relational import LatentClassRelational, RelationalData

    rng = np.random.default_rng(3)
    users, films = np.nonzero(rng.random((12, 9)) < 0.6)
    liked = (users < 6) == (films < 4)
    table = pd.DataFrame({"user": [f"u{user}" for user in users], "film": [f"f{film}" for film in films],
                          "stars": np.where(liked, 5, 1) + rng.integers(0, 2, users.size)})
    data = RelationalData.from_ratings(table, user="user", item="film", rating="stars")
    model = LatentClassRelational({"users": 2, "items": 3})
    return model.fit(data, key=jax.random.key(1), n_restarts=3, max_passes=30), data


def _rewritten(path, target, change):
    """A copy of a saved result at ``target`` whose metadata JSON ``change`` edited in place."""
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = json.loads(str(arrays.pop("metadata")))
    change(metadata, arrays)
    np.savez(target, metadata=np.asarray(json.dumps(metadata)), **arrays)
    return target


def test_a_latent_class_relational_result_round_trips_and_its_methods_work(tmp_path, ratings_lrm):
    from zoo.relational import LRMResult
    from zoo.report import write_report

    result, data = ratings_lrm
    path = save_result(tmp_path / "lrm", result, settings={"note": "ratings"})
    loaded = load_result(path)
    assert isinstance(loaded, LRMResult) and loaded.model == result.model and loaded.schema == result.schema
    for saved, kept in zip(jax.tree_util.tree_leaves(loaded.params), jax.tree_util.tree_leaves(result.params)):
        assert type(saved) is type(kept) and saved.dtype == kept.dtype
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(kept))
    assert type(loaded.params) is type(result.params) and loaded.history.keys() == result.history.keys()
    for name in result.history:
        np.testing.assert_array_equal(loaded.history[name], result.history[name])
    np.testing.assert_array_equal(loaded.restart_scores, result.restart_scores)
    for field in ("best_restart", "n_passes", "converged", "stopped_by", "provenance"):
        assert getattr(loaded, field) == getattr(result, field), field
    cells = np.array([[0, 0], [11, 8]])
    np.testing.assert_array_equal(loaded.predict_proba(cells), result.predict_proba(cells))
    assert {name: list(labels) for name, labels in loaded.classes().items()} == {
        name: list(labels) for name, labels in result.classes().items()}
    assert "made with" in repr(loaded)
    write_report(tmp_path / "report.html", loaded, data=data)
    metadata = read_metadata(path)
    assert metadata["result"] == "zoo.relational.latent_class:LRMResult" and metadata["model"] == result.model
    assert metadata["settings"] == {"note": "ratings"} and metadata["provenance"] == result.provenance
    # An IRM's chains are saved with every draw's clusters, which give the result back (2026-12-07: the
    # message named to_inference_data(), whose file has no clusters).
    from zoo.relational import InfiniteRelational, IRMResult

    irm = InfiniteRelational(max_clusters=8).sample(data, jax.random.key(0), n_chains=2, n_warmup=2, n_draws=2,
                                                    progress=False)
    with pytest.raises(TypeError, match=r"^result: .*, got IRMResult: Gibbs chains, whose draws, every draw's "
                                        r"clusters with them, zoo.io.save_chains\(path, result.to_inference_data\("
                                        r"assignments=True\)\) saves, and IRMResult.from_inference_data\("
                                        r"zoo.io.load_chains\(path\), data\) reads back into a result"):
        save_result(tmp_path / "x.npz", irm)
    with pytest.raises(TypeError, match=r"^idata: expected an arviz.InferenceData, got IRMResult; its "
                                        r"to_inference_data\(assignments=True\) is one$"):
        save_chains(tmp_path / "irm.nc", irm)  # the result itself: the message names what to give
    chains = save_chains(tmp_path / "irm.nc", irm.to_inference_data(assignments=True))  # as the message says
    back = IRMResult.from_inference_data(load_chains(chains), data)
    for name, draws in irm.assignments.items():
        np.testing.assert_array_equal(back.assignments[name], draws)
    with pytest.raises(TypeError, match="^schedule: only for an EM result, not a LRMResult"):
        save_result(tmp_path / "x.npz", result, schedule=TemperedEM())
    with pytest.raises(TypeError, match="^model: only for an EM result's file; '.*' holds a LRMResult"):
        load_result(path, model=result.model)


def test_a_damaged_latent_class_relational_file_is_named(tmp_path, ratings_lrm):
    path = save_result(tmp_path / "lrm", ratings_lrm[0])

    def shape_of(metadata, arrays):  # the users' class posteriors, one user short
        reference = metadata["result"]["fields"]["params"]["fields"]["responsibilities"]["tuple"][0]["array"]
        arrays[reference] = arrays[reference][1:]

    def untrusted(metadata, arrays):
        metadata["result"]["dataclass"] = "os:system"

    def missing(metadata, arrays):
        del arrays[metadata["result"]["fields"]["restart_scores"]["array"]]

    def not_a_result(metadata, arrays):
        metadata["result"]["dataclass"] = "zoo.relational.latent_class:LatentClassRelational"

    def best(metadata, arrays):
        metadata["result"]["fields"]["best_restart"] = 7

    for change, message in ((shape_of, r"params.responsibilities\[0\]: expected shape \(12, 2\) for this model and data, got \(11, 2\)"),
                            (untrusted, "result: refusing to import 'os'"),
                            (missing, "result.restart_scores: the array 'arrays/.*' is missing"),
                            (not_a_result, "'zoo.relational.latent_class:LatentClassRelational' is not a result that"),
                            (best, "best_restart 7 is not an index of the \\(3,\\) restart scores")):
        with pytest.raises(ValueError, match=f"^path: '.*{change.__name__}.npz': {message}"):
            load_result(_rewritten(path, tmp_path / f"{change.__name__}.npz", change))


def _chains(seed=0, n_chains=3, n_draws=40, n_points=8):
    rng = np.random.default_rng(seed)
    assignments = rng.integers(0, 3, size=(n_chains, n_draws, n_points))
    return az.from_dict(
        posterior={"assignments": assignments, "alpha": rng.gamma(2.0, size=(n_chains, n_draws))},
        sample_stats={"n_clusters": np.array([[len(set(draw)) for draw in chain] for chain in assignments]),
                      "log_joint": rng.normal(size=(n_chains, n_draws))},
        dims={"assignments": ["points"]},
    )


def test_chains_round_trip_through_netcdf_with_settings(tmp_path):
    idata = _chains()
    model = GaussianMixture(3, variance_floor=1e-4)
    path = save_chains(tmp_path / "chains.nc", idata, model=model, settings={"n_sweeps": 40})
    loaded = load_chains(path)
    np.testing.assert_array_equal(loaded.posterior["assignments"].values, idata.posterior["assignments"].values)
    np.testing.assert_array_equal(loaded.sample_stats["log_joint"].values, idata.sample_stats["log_joint"].values)
    assert chains_settings(loaded) == {"model": model, "settings": {"n_sweeps": 40}}
    assert chains_settings(idata) == {"model": None, "settings": None}  # the original is left alone
    with pytest.raises(TypeError, match="^idata:"):
        save_chains(tmp_path / "x.nc", {"posterior": 1})
    with pytest.raises(FileNotFoundError, match="^path:"):
        load_chains(tmp_path / "missing.nc")


# ----------------------------------------------------------------------------- chain checkpoints
def _checkpoint_problem():
    from inference import neal
    from inference.chains import stack_states
    from inference.concentration import gamma_prior
    from zoo.dirichlet.families import normal_gamma

    family = normal_gamma(1, kappa=0.2)
    data = np.array([[-6.0], [-6.3], [0.1], [-0.2], [6.2], [5.9]], dtype=np.float32)
    # Algorithm 8 with α resampled: the state holds parameters, α and counts, all to be restored.
    step = neal.build_kernel(family, "auxiliary", n_auxiliary=2, alpha_prior=gamma_prior(1.0, 1.0))
    states = stack_states([neal.init(jax.random.key(chain), data, family, algorithm="auxiliary",
                                     max_clusters=6, alpha=1.0) for chain in range(2)])
    return step, states, data


def test_checkpointed_chains_resume_bit_identically(tmp_path):
    from inference.chains import sample_chains
    from zoo.io import load_checkpoint, save_checkpoint

    step, states, data = _checkpoint_problem()
    key = jax.random.key(11)
    run = dict(draws_per_call=3, progress=False)
    whole = sample_chains(key, step, states, data, n_warmup=3, n_draws=9, **run)
    assert whole.next_sweep == 12

    # A run stopped by its time budget after the warm-up call, saved, loaded and continued.
    stopped = sample_chains(key, step, states, data, n_warmup=3, n_draws=9, time_budget=1e-9, **run)
    assert not stopped.completed and stopped.n_draws == 0 and stopped.next_sweep == 3
    path = save_checkpoint(tmp_path / "stopped", stopped, key, settings={"note": "warm-up done"})
    checkpoint = load_checkpoint(path, like=states)
    assert checkpoint.next_sweep == 3 and checkpoint.settings["settings"] == {"note": "warm-up done"}
    np.testing.assert_array_equal(jax.random.key_data(checkpoint.rng_key), jax.random.key_data(key))
    resumed = sample_chains(checkpoint.rng_key, step, checkpoint.state, data, n_warmup=0, n_draws=9,
                            first_sweep=checkpoint.next_sweep, **run)
    for name in whole.samples:
        np.testing.assert_array_equal(resumed.samples[name], whole.samples[name])

    # A complete shorter run continued for the remaining draws.
    first = sample_chains(key, step, states, data, n_warmup=3, n_draws=3, **run)
    checkpoint = load_checkpoint(save_checkpoint(tmp_path / "first.npz", first, key), like=states)
    rest = sample_chains(checkpoint.rng_key, step, checkpoint.state, data, n_warmup=0, n_draws=6,
                         first_sweep=checkpoint.next_sweep, **run)
    for name in whole.samples:
        joined = np.concatenate([first.samples[name], rest.samples[name]], axis=1)
        np.testing.assert_array_equal(joined, whole.samples[name])
    for final, expected in zip(jax.tree_util.tree_leaves(rest.final_state), jax.tree_util.tree_leaves(whole.final_state)):
        np.testing.assert_array_equal(np.asarray(final), np.asarray(expected))


def test_checkpoint_says_what_drew_the_chains_and_warns_when_continued_elsewhere(tmp_path):
    from inference.chains import sample_chains
    from inference.provenance import ProvenanceWarning, provenance
    from zoo.io import load_checkpoint, save_checkpoint

    step, states, data = _checkpoint_problem()
    key = jax.random.key(3)
    result = sample_chains(key, step, states, data, n_warmup=1, n_draws=2, progress=False)
    assert result.provenance == provenance()  # taken when the chains were sampled
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProvenanceWarning)  # drawn here, continued here: no warning
        here = load_checkpoint(save_checkpoint(tmp_path / "here", result, key), like=states)
    assert here.provenance == result.provenance

    elsewhere = result._replace(provenance={**result.provenance, "host_cpu": "another-cpu", "jax_version": "0.0.1"})
    path = save_checkpoint(tmp_path / "elsewhere", elsewhere, key)
    with pytest.warns(ProvenanceWarning, match=r"host_cpu 'another-cpu' there, '[^']+' here") as caught:
        loaded = load_checkpoint(path, like=states)
    assert "jax_version '0.0.1' there" in str(caught[0].message) and caught[0].filename == __file__
    assert loaded.provenance["host_cpu"] == "another-cpu"
    from inference.provenance import provenance_differences

    assert provenance_differences(here.provenance) == {}
    assert provenance_differences(loaded.provenance)["jax_version"] == ("0.0.1", jax.__version__)
    with pytest.raises(TypeError, match="saved"):
        provenance_differences("znver4")

    # A result built by hand says nothing, and its checkpoint is loaded without a word.
    unknown = result._replace(provenance=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProvenanceWarning)
        assert load_checkpoint(save_checkpoint(tmp_path / "unknown", unknown, key), like=states).provenance is None


def test_checkpoint_arguments_are_checked(tmp_path):
    from inference.chains import sample_chains
    from zoo.io import load_checkpoint, save_checkpoint

    step, states, data = _checkpoint_problem()
    result = sample_chains(jax.random.key(0), step, states, data, n_warmup=0, n_draws=2, progress=False)
    with pytest.raises(TypeError, match="^result:"):
        save_checkpoint(tmp_path / "x", {"final_state": states}, jax.random.key(0))
    with pytest.raises(TypeError, match="^rng_key:"):
        save_checkpoint(tmp_path / "x", result, 0)
    path = save_checkpoint(tmp_path / "x", result, jax.random.key(0))
    with pytest.raises(ValueError, match="^like:"):
        load_checkpoint(path, like={"other": np.zeros(2)})
    with pytest.raises(FileNotFoundError, match="^path:"):
        load_checkpoint(tmp_path / "missing.npz", like=states)
    with pytest.raises(ValueError, match="^first_sweep:"):
        sample_chains(jax.random.key(0), step, states, data, n_draws=2, first_sweep=-1, progress=False)


def test_row_and_column_names_are_kept_and_files_without_them_still_load(tmp_path):
    named = CoOccurrence(TRAIN.rows, TRAIN.cols, TRAIN.counts, TRAIN.shape,
                         [f"doc{index}" for index in range(TRAIN.n_rows)],
                         [f"w{index}" for index in range(TRAIN.n_cols)])
    result = tempered_em(Aspect(2, backend="xla"), named, key=jax.random.key(0), max_iter=20)
    loaded = load_result(save_result(tmp_path / "named.npz", result))
    assert loaded.row_names == named.row_names and loaded.col_names == named.col_names
    held_out = CoOccurrence(VALID.rows, VALID.cols, VALID.counts, VALID.shape, named.row_names, named.col_names)
    with pytest.raises(ValueError, match=r"^data: its row_names differ from the fitted data's"):
        loaded.perplexity(held_out.select_rows(np.arange(TRAIN.n_rows)[::-1]))
    assert loaded.perplexity(held_out) == pytest.approx(result.perplexity(held_out))
    with np.load(tmp_path / "named.npz") as archive:  # as written before names were kept
        arrays = dict(archive)
    metadata = json.loads(str(arrays["metadata"]))
    del metadata["row_names"], metadata["col_names"]
    arrays["metadata"] = np.asarray(json.dumps(metadata))
    np.savez(tmp_path / "old.npz", **arrays)
    old = load_result(tmp_path / "old.npz")
    assert old.row_names is None and old.col_names is None
    assert old.perplexity(held_out.select_rows(np.arange(TRAIN.n_rows)[::-1])) > 0  # nothing to check against


def test_a_grown_tree_scores_held_out_tokens_and_round_trips(tmp_path):
    from zoo.dyadic.cluster_abstraction import GrownTree, anneal_tree
    from zoo.dyadic.predictive import perplexity

    grown = anneal_tree(TRAIN, key=jax.random.key(0), max_leaves=3, valid=VALID, prior_count=0.1,
                        max_iter_per_level=30)
    assert grown.perplexity(VALID) == pytest.approx(perplexity(grown.model, grown.params, VALID))
    loaded = load_result(save_result(tmp_path / "grown.npz", grown))
    assert isinstance(loaded, GrownTree) and loaded.model == grown.model and loaded.beta == grown.beta
    assert loaded.stopped_by == grown.stopped_by
    pd.testing.assert_frame_equal(loaded.history, grown.history)
    for saved, kept in zip(loaded.params, grown.params):
        assert isinstance(saved, jax.Array)
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(kept))
    assert loaded.perplexity(VALID) == pytest.approx(grown.perplexity(VALID))
