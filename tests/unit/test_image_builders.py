"""One registry of image builders (runner/images/builders.py): a new image cu-run builds is one
module that registers its builder. A throwaway builder, registered here and nowhere else, is
listed and run by `cu-run image build`, with its own options, and named in a missing image's fix."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runner.cli import app
from runner.errors import UsageError
from runner.images.builders import Builder, builder_names, image_named, register_builder, unregister_builder
from runner.images.catalog import Catalog


@pytest.fixture
def toy_builder(tmp_path, monkeypatch):
    monkeypatch.setenv("CU_RUN_HOME", str(tmp_path / "home"))
    asked = []

    def build(request):
        asked.append(request)
        # What a real builder makes: a catalog entry. This one has none, so it says why.
        raise UsageError(f"toy-image asked for {request.options['iso']} (force {request.force})")

    register_builder(Builder("toy-image", build, "a test's stand-in"))
    yield asked
    unregister_builder("toy-image")


def test_a_builder_registered_by_one_module_is_listed_and_run_with_its_options(toy_builder, tmp_path):
    assert builder_names()[:3] == ("linux-test", "linux-desktop", "windows-11") and "toy-image" in builder_names()
    result = CliRunner().invoke(app, ["image", "build", "toy-image", "--iso", "/media/win.iso", "--force"])
    assert isinstance(result.exception, UsageError), result.output
    assert str(result.exception) == "toy-image asked for /media/win.iso (force True)"
    [request] = toy_builder
    assert request.catalog.root == tmp_path / "home" / "images"
    with pytest.raises(UsageError) as info:
        image_named(Catalog(tmp_path / "empty"), "toy-image")
    assert info.value.fix == "build it: cu-run image build toy-image"


def test_an_image_nobody_builds_is_refused_listing_those_that_are(tmp_path):
    result = CliRunner().invoke(app, ["image", "build", "toy-image"])
    assert result.exit_code == 2 and "'toy-image' is not an image cu-run builds: linux-test, linux-desktop" in result.output


def test_a_name_is_registered_once(toy_builder):
    with pytest.raises(ValueError, match="registered twice"):
        register_builder(Builder("toy-image", lambda _r: None, "again"))


def test_the_windows_builder_names_every_medium_it_lacks_before_anything(tmp_path):
    from runner.images.builders import BuildRequest, get_builder

    asked = []
    request = BuildRequest(Catalog(tmp_path), accel=lambda: asked.append("accel") or "kvm",
                           options={"iso": tmp_path / "win.iso"})
    with pytest.raises(UsageError, match="building windows-11 needs --virtio-iso, --python-installer"):
        get_builder("windows-11").build(request)
    assert asked == [] and not any(tmp_path.iterdir())  # no accelerator probed, nothing written
