"""latentzoo: latent-class models for dyadic and relational data (the models)."""
