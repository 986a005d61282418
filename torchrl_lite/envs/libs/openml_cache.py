"""Write a table into scikit-learn's OpenML cache, so that ``fetch_openml`` (and so
``OpenMLEnv``) reads it without a network.

The cache mirrors OpenML's web paths under ``<data_home>/openml/openml.org/`` as gzip
files: the name/version listing, the dataset description (its data URL and the table's
md5), the column list, the qualities (row count) and the table itself as ARFF.
:func:`synthetic_adult` makes random rows with the columns of OpenML's ``adult`` table
(version 1), for running TorchRL's bandit example offline; they are not the real data.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

from torchrl_lite.envs.libs.openml import sklearn_data_home

__all__ = ["write_openml_cache", "synthetic_adult", "ADULT_COLUMNS"]

# OpenML's adult (version 1): column -> category values (None: numeric); "class" is the
# table's target, and TorchRL's bandit predicts "occupation" from the others
ADULT_COLUMNS = {
    "age": None,
    "workclass": ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov"],
    "fnlwgt": None,
    "education": ["Bachelors", "Some-college", "11th", "HS-grad", "Masters", "Doctorate"],
    "education-num": None,
    "marital-status": ["Married-civ-spouse", "Divorced", "Never-married", "Widowed"],
    "occupation": ["Tech-support", "Craft-repair", "Sales", "Exec-managerial", "Adm-clerical"],
    "relationship": ["Wife", "Own-child", "Husband", "Not-in-family", "Unmarried"],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "sex": ["Female", "Male"],
    "capital-gain": None,
    "capital-loss": None,
    "hours-per-week": None,
    "native-country": ["United-States", "Mexico", "Philippines", "Germany", "Canada"],
    "class": [">50K", "<=50K"],
}
_ADULT_RANGES = {  # numeric columns: (low, high) of the uniform draws
    "age": (17, 90),
    "fnlwgt": (12_000, 1_500_000),
    "education-num": (1, 16),
    "capital-gain": (0, 10_000),
    "capital-loss": (0, 4_000),
    "hours-per-week": (1, 99),
}
ADULT_DATA_ID = 1590  # OpenML's id of adult version 1


def synthetic_adult(rows: int = 1000, seed: int = 0, missing: float = 0.02) -> dict:
    """Random rows with adult's columns: ``{column: list of values}`` (``None`` marks a
    missing value, in a ``missing`` share of the category cells, as the real table has)."""
    rng = np.random.default_rng(seed)
    table = {}
    for column, values in ADULT_COLUMNS.items():
        if values is None:
            low, high = _ADULT_RANGES[column]
            table[column] = rng.integers(low, high + 1, rows).tolist()
        else:
            drawn = [values[i] for i in rng.integers(0, len(values), rows)]
            if column != "class":  # the target column has no missing values
                holes = rng.random(rows) < missing
                drawn = [None if hole else v for v, hole in zip(drawn, holes)]
            table[column] = drawn
    return table


def write_openml_cache(
    name: str,
    table: dict,
    categories: dict,
    *,
    target: str,
    version: int = 1,
    data_id: int,
    data_home=None,
    note: str = "",
) -> Path:
    """Write ``table`` (``{column: values}``, ``None`` for missing) as OpenML dataset
    ``name``/``version`` into scikit-learn's cache (``data_home``, default
    ``$SCIKIT_LEARN_DATA`` or ``~/scikit_learn_data``); returns the table's file.

    ``categories`` maps each categorical column to its values (None: numeric); ``note``
    goes into the description (say there what the rows are)."""
    columns = list(table)
    if not columns or target not in table:
        raise ValueError(f"write_openml_cache: target {target!r} is not a column of {columns}")
    lengths = {len(v) for v in table.values()}
    if len(lengths) != 1:
        raise ValueError(f"write_openml_cache: the columns have different lengths {lengths}")
    rows = lengths.pop()
    root = Path(data_home if data_home is not None else sklearn_data_home()) / "openml"
    site = root / "openml.org"
    file_id = data_id
    data_path = f"data/v1/download/{file_id}/{name}.arff"
    arff = _arff(name, table, categories).encode("utf-8")
    description = {
        "id": str(data_id),
        "name": name,
        "version": str(version),
        "description": note,
        "format": "ARFF",
        "file_id": str(file_id),
        "default_target_attribute": target,
        "status": "active",
        "md5_checksum": hashlib.md5(arff).hexdigest(),
        "url": f"https://api.openml.org/{data_path}",
    }
    features = [
        {
            "index": str(i),
            "name": column,
            "data_type": "numeric" if categories.get(column) is None else "nominal",
            "nominal_value": categories.get(column) or [],
            "is_target": "true" if column == target else "false",
            "is_ignore": "false",
            "is_row_identifier": "false",
            "number_of_missing_values": str(sum(v is None for v in table[column])),
        }
        for i, column in enumerate(columns)
    ]
    listing = {"data": {"dataset": [{"did": data_id, "name": name, "version": version}]}}
    files = {
        f"api/v1/json/data/list/data_name/{name.lower()}/limit/2/data_version/{version}": listing,
        f"api/v1/json/data/{data_id}": {"data_set_description": description},
        f"api/v1/json/data/features/{data_id}": {"data_features": {"feature": features}},
        f"api/v1/json/data/qualities/{data_id}": {
            "data_qualities": {"quality": [{"name": "NumberOfInstances", "value": str(rows)}]}
        },
    }
    for path, content in files.items():
        _write_gz(site / (path + ".gz"), json.dumps(content).encode("utf-8"))
    _write_gz(site / (data_path + ".gz"), arff)
    return site / (data_path + ".gz")


def _arff(name: str, table: dict, categories: dict) -> str:
    lines = [f"% {name}: written by torchrl_lite's write_openml_cache", f"@relation {name}"]
    for column in table:
        values = categories.get(column)
        kind = "numeric" if values is None else "{" + ",".join(values) + "}"
        lines.append(f"@attribute '{column}' {kind}")
    lines.append("@data")
    for row in zip(*table.values()):
        lines.append(",".join("?" if v is None else str(v) for v in row))
    return "\n".join(lines) + "\n"


def _write_gz(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(content)
