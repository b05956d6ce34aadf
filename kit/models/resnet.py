"""ResNet-50 and ResNeXt-101 32x4d in plain torch, with torchvision's parameter names.

torchvision's wheel does not import with the CPU torch pinned here, so the architecture is
written out; the state_dict keys match torchvision's, so its public checkpoints load as they are.
"""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int,
        groups: int,
        base_width: int,
        downsample: nn.Module | None,
    ):
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision-compatible ResNet/ResNeXt with Bottleneck blocks.

    `softmax=True` appends a softmax, as ByteMLPerf's resnet50 export does (`softmax_tensor`).
    """

    def __init__(
        self,
        layers: tuple[int, ...],
        groups: int = 1,
        width_per_group: int = 64,
        num_classes: int = 1000,
        base: int = 64,
        softmax: bool = False,
    ):
        super().__init__()
        self.groups, self.base_width, self.inplanes = groups, width_per_group, base
        self.softmax = softmax
        self.conv1 = nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(base, layers[0], 1)
        self.layer2 = self._make_layer(base * 2, layers[1], 2)
        self.layer3 = self._make_layer(base * 4, layers[2], 2)
        self.layer4 = self._make_layer(base * 8, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base * 8 * Bottleneck.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(
                    self.inplanes, planes * Bottleneck.expansion, 1, stride=stride, bias=False
                ),
                nn.BatchNorm2d(planes * Bottleneck.expansion),
            )
        layers = [
            Bottleneck(self.inplanes, planes, stride, self.groups, self.base_width, downsample)
        ]
        self.inplanes = planes * Bottleneck.expansion
        layers += [
            Bottleneck(self.inplanes, planes, 1, self.groups, self.base_width, None)
            for _ in range(1, blocks)
        ]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.fc(torch.flatten(self.avgpool(x), 1))
        return torch.softmax(x, dim=1) if self.softmax else x


def resnet50(small: bool = False, softmax: bool = True) -> ResNet:
    if small:
        return ResNet((1, 1, 1, 1), base=8, num_classes=10, softmax=softmax)
    return ResNet((3, 4, 6, 3), softmax=softmax)


def resnext101_32x4d(small: bool = False) -> ResNet:
    if small:
        return ResNet((1, 1, 1, 1), groups=4, width_per_group=4, base=16, num_classes=10)
    return ResNet((3, 4, 23, 3), groups=32, width_per_group=4)
