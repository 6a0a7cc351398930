# Makes angular-600x12.hdf5, a tiny file in the ann-benchmarks layout (h5py defaults, as
# ann-benchmarks writes them): train, test, neighbors (top 100 by cosine distance), distances,
# and the `distance` attribute. Run with a Python that has numpy and h5py.
import h5py
import numpy as np

rng = np.random.default_rng(7)
train = rng.standard_normal((600, 12)).astype(np.float32)
test = rng.standard_normal((20, 12)).astype(np.float32)
tn = train / np.linalg.norm(train, axis=1, keepdims=True)
qn = test / np.linalg.norm(test, axis=1, keepdims=True)
d = 1 - qn @ tn.T
nb = np.argsort(d, axis=1, kind="stable")[:, :100].astype(np.int32)
dist = np.take_along_axis(d, nb, axis=1).astype(np.float32)
with h5py.File("angular-600x12.hdf5", "w") as f:
    f.attrs["type"] = "dense"
    f.attrs["distance"] = "angular"
    f.attrs["dimension"] = 12
    f.attrs["point_type"] = "float"
    f.create_dataset("train", data=train)
    f.create_dataset("test", data=test)
    f.create_dataset("neighbors", data=nb)
    f.create_dataset("distances", data=dist)
