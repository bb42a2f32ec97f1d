"""latentzoo inference: tempered EM, incremental EM and Dirichlet-process Gibbs kernels."""
