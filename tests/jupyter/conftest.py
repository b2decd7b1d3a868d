"""Fixtures for the notebook surface: a scripted Session on the real loop."""

from __future__ import annotations

import pytest

from .fakes import FakeSession


@pytest.fixture
def fake_session(settings):
    from stitchcuda_lab.problem import problem_from_source
    problem = problem_from_source(SOURCE)
    return FakeSession.create(problem, settings.replace(iters=2))


SOURCE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x + 1.0)

def get_inputs():
    return [torch.randn(64, 32)]

def get_init_inputs():
    return []
'''
