"""Dataset adapters by name."""

from __future__ import annotations

from kit.datasets.base import Dataset
from kit.datasets.cail2019 import Cail2019
from kit.datasets.cifar import Cifar100
from kit.datasets.criteo import Criteo
from kit.datasets.fake import FakeDataset
from kit.datasets.imagenet import ImageNet
from kit.datasets.squad import Squad
from kit.registry import Registry

DATASETS: Registry[type[Dataset]] = Registry("dataset")
for _cls in (Squad, ImageNet, Criteo, Cail2019, Cifar100, FakeDataset):
    DATASETS.register(_cls.name, _cls)
