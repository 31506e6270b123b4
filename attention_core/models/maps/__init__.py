"""The maps of a forward pass: features, pooling, the long path's blocked pass
and map grid, transport."""
