"""OpenMLEnv: a classification dataset played as a contextual bandit.

Each ``reset`` draws ``batch_size`` rows of the dataset: their features are the
``"observation"`` and their class the hidden ``"y"``. The agent picks a class as its
``"action"``; ``step`` pays reward 1 for the right class and 0 otherwise, and every
episode ends after that one step. This is the setting of TorchRL's bandit example.

The OpenML tables themselves come from scikit-learn's OpenML cache
(``~/scikit_learn_data/openml`` or ``$SCIKIT_LEARN_DATA``), read with
``download_if_missing=False``: nothing is downloaded. :meth:`OpenMLEnv.from_arrays`
plays any in-memory dataset the same way.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Categorical, Composite, Unbounded
from torchrl_lite.envs.common import EnvBase

__all__ = ["OpenMLEnv"]

# TorchRL's dataset names -> (OpenML name, version, how the table becomes features/classes)
OPENML_DATASETS = {
    "adult_num": ("adult", 1, "adult"),
    "adult_onehot": ("adult", 1, "adult_onehot"),
    "mushroom_num": ("mushroom", 1, "codes"),
    "mushroom_onehot": ("mushroom", 1, "codes_onehot"),
    "covertype": ("covertype", 3, "scaled"),
    "shuttle": ("shuttle", 1, "scaled"),
    "magic": ("MagicTelescope", 1, "scaled"),
}


def sklearn_data_home() -> Path:
    """scikit-learn's data folder: ``$SCIKIT_LEARN_DATA`` or ``~/scikit_learn_data``."""
    return Path(os.environ.get("SCIKIT_LEARN_DATA", Path.home() / "scikit_learn_data"))


def openml_cache_missing(folder: Path, name: str, version: int) -> Path | None:
    """The first file of ``fetch_openml(name, version=version)``'s cache missing under
    ``folder`` (scikit-learn's ``<data_home>/openml``), or None: then nothing is fetched."""
    root = folder / "openml.org"
    listing = (
        root / f"api/v1/json/data/list/data_name/{name.lower()}/limit/2/data_version/{version}.gz"
    )
    if not listing.exists():
        return listing
    data_id = _read_json(listing)["data"]["dataset"][0]["did"]
    info = root / f"api/v1/json/data/{data_id}.gz"
    if not info.exists():
        return info
    table = root / (
        urlparse(_read_json(info)["data_set_description"]["url"]).path.lstrip("/") + ".gz"
    )
    for path in (
        root / f"api/v1/json/data/features/{data_id}.gz",
        root / f"api/v1/json/data/qualities/{data_id}.gz",
        table,
    ):
        if not path.exists():
            return path
    return None


def _read_json(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _load_openml(dataset_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Features ``[N, F]`` (float32) and class ids ``[N]`` of a cached OpenML dataset,
    prepared as TorchRL's ``OpenMLExperienceReplay`` prepares them: adult predicts the
    occupation (rows with missing values dropped), categories become codes (and one-hot
    columns for ``*_onehot``), numeric features are standardised."""
    if dataset_name not in OPENML_DATASETS:
        raise ValueError(
            f"OpenMLEnv: unknown dataset {dataset_name!r}; known: {sorted(OPENML_DATASETS)}."
        )
    name, version, recipe = OPENML_DATASETS[dataset_name]
    folder = sklearn_data_home() / "openml"
    try:
        from sklearn.datasets import fetch_openml
        from sklearn.preprocessing import LabelEncoder, OneHotEncoder, StandardScaler
    except ImportError as err:
        raise ImportError(
            f"OpenMLEnv({dataset_name!r}) reads OpenML's {name!r} table through scikit-learn's "
            f"cache ({folder}), and scikit-learn is not installed (pip install scikit-learn). "
            "Nothing is downloaded here; OpenMLEnv.from_arrays(features, labels) plays any "
            "dataset you have in memory."
        ) from err
    missing = openml_cache_missing(folder, name, version)
    if missing is not None:
        raise FileNotFoundError(
            f"OpenMLEnv({dataset_name!r}): OpenML's {name!r} table is not in scikit-learn's "
            f"cache {folder} ({missing} is missing), and nothing is downloaded here. Fetch it "
            f"once where the network is reachable (sklearn.datasets.fetch_openml({name!r}, "
            f"version={version})) and copy {folder} over."
        )
    x, y = fetch_openml(name, version=version, data_home=str(folder.parent), return_X_y=True)
    if recipe.startswith("adult"):
        x = x[~x.isna().any(axis=1)]
        y, x = x["occupation"], x.drop(columns=["occupation"])
    categorical = list(x.select_dtypes(exclude="number").columns)
    numeric = [c for c in x.columns if c not in categorical]
    x = x.copy()
    for column in categorical:
        x[column] = LabelEncoder().fit_transform(x[column])
    if recipe == "adult_onehot":
        x = np.concatenate(
            [
                StandardScaler().fit_transform(x[numeric]),
                OneHotEncoder(sparse_output=False).fit_transform(x[categorical]),
            ],
            axis=1,
        )
    elif recipe == "codes_onehot":
        x = OneHotEncoder(sparse_output=False).fit_transform(x)
    else:
        x = StandardScaler().fit_transform(x)
    labels = LabelEncoder().fit_transform(y)
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(labels, dtype=torch.long)


class OpenMLEnv(EnvBase):
    """An OpenML classification dataset as a one-step contextual bandit.

    Args:
        dataset_name: one of TorchRL's names (``"adult_num"``, ``"adult_onehot"``,
            ``"mushroom_num"``, ``"mushroom_onehot"``, ``"covertype"``, ``"shuttle"``,
            ``"magic"``), read from scikit-learn's OpenML cache (never downloaded).
        device: where the tensors live.
        batch_size: rows drawn per ``reset`` (e.g. ``[256]``).

    Example:
        >>> env = OpenMLEnv.from_arrays(torch.eye(3), torch.tensor([0, 1, 2]), batch_size=[4])
        >>> td = env.reset()
        >>> td["action"] = td["y"]  # always right
        >>> env.step(td)["next", "reward"].sum().item()
        4.0
    """

    def __init__(self, dataset_name: str, device="cpu", batch_size=None, *, _data=None):
        features, labels = _data if _data is not None else _load_openml(dataset_name)
        if features.shape[0] != labels.shape[0] or features.shape[0] == 0:
            raise ValueError(
                f"OpenMLEnv: features {list(features.shape)} and labels {list(labels.shape)} "
                "must hold the same, non-zero number of rows."
            )
        batch_size = torch.Size([] if batch_size is None else batch_size)
        super().__init__(device=device, batch_size=batch_size)
        self.dataset_name = dataset_name
        self.features = features.to(self.device, torch.float32)  # [N, F]
        self.labels = labels.to(self.device, torch.long)  # [N]
        n_classes = int(self.labels.max()) + 1
        self.observation_spec = Composite(
            {
                K.OBSERVATION: Unbounded((*batch_size, features.shape[-1]), device=self.device),
                "y": Categorical(n_classes, shape=batch_size, device=self.device),
            },
            shape=batch_size,
        )
        self.action_spec = Categorical(n_classes, shape=batch_size, device=self.device)
        self.reward_spec = Unbounded((*batch_size, 1), device=self.device)
        self.rng = torch.Generator(device=self.device).manual_seed(0)

    @classmethod
    def from_arrays(cls, features, labels, batch_size=None, device="cpu") -> OpenMLEnv:
        """The same bandit over in-memory ``features [N, F]`` and class ids ``labels [N]``."""
        data = (torch.as_tensor(features), torch.as_tensor(labels))
        return cls("arrays", device=device, batch_size=batch_size, _data=data)

    def _set_seed(self, seed: int | None) -> None:
        self.rng = torch.Generator(device=self.device).manual_seed(0 if seed is None else seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        index = torch.randint(
            self.labels.shape[0], self.batch_size, generator=self.rng, device=self.device
        )
        return TensorDict(
            {K.OBSERVATION: self.features[index], "y": self.labels[index]},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get(K.ACTION)
        if action.shape != tensordict.get("y").shape:  # one-hot actions
            action = action.argmax(-1)
        reward = (action == tensordict.get("y")).to(torch.float32).unsqueeze(-1)  # [*B, 1]
        done = torch.ones_like(reward, dtype=torch.bool)
        return TensorDict(
            {
                K.OBSERVATION: tensordict.get(K.OBSERVATION),
                "y": tensordict.get("y"),
                K.REWARD: reward,
                K.DONE: done,
                K.TERMINATED: done.clone(),
                K.TRUNCATED: torch.zeros_like(done),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )
