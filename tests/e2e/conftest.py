"""Fixtures that boot real VMs: libvirt, QEMU (TCG here), VNC and SSH, nothing faked.

Only tests that boot a VM ask for linux_image (or a fixture built on it); the image is built
and its two warm slots made then, once per session, in the tests' own cache.
"""

import pytest
from image_prefetch import wait_for_prefetched
from vmtools import leftovers

from runner.vm.gc import collect_garbage

from runner.images.catalog import Catalog, Image
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.images.linux_images import LINUX_DESKTOP, LINUX_TEST, build_image
from runner.runs.scope import resolve_accel


@pytest.fixture(scope="session")
def built_image(settings, request) -> Image:
    """The linux-test image, built by the project's own recipe if the cache lacks it (while the
    unit tests run, tests/image_prefetch.py)."""
    wait_for_prefetched(request.config, LINUX_TEST)
    image, _built = build_image(Catalog(settings.images_dir), LINUX_TEST, progress=lambda _line: None)
    return image


@pytest.fixture(scope="session")
def accel(settings) -> str:
    """What VMs run under here: the probe boots a sector of its own, no image (runner.hypervisor.accel)."""
    chosen, _probe = resolve_accel(settings, "auto")
    return chosen


@pytest.fixture(scope="session")
def host(settings):
    h = LibvirtHost(settings.libvirt_uri)
    yield h
    h.close()


_EARLIER = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def earlier_sessions_collected(host, settings, request) -> None:
    """What an earlier session left in the tests' cache (one killed by a time limit or by hand) is
    collected once, before the first e2e test, and named in the summary. The cache outlives a
    session, so that residue would otherwise fail the first test that checks for leftovers,
    whichever it is, and name no cause."""
    request.config.stash[_EARLIER] = collect_garbage(host, settings).removed


@pytest.fixture(autouse=True)
def leaves_nothing_behind(earlier_sessions_collected, host, settings, request):
    """Every e2e test ends with no domain or episode folder of a dead runner: the test that
    leaves one fails itself, by name, and what it left is collected so the next test starts clean."""
    yield
    left = leftovers(host, settings)
    if left:
        collect_garbage(host, settings)
        pytest.fail(f"{request.node.nodeid} left behind: {'; '.join(left)}", pytrace=False)


def pytest_terminal_summary(terminalreporter, config):
    if earlier := config.stash.get(_EARLIER, []):
        terminalreporter.write_line(f"left by an earlier session and collected before the e2e tests: {'; '.join(earlier)}")


@pytest.fixture(scope="session")
def warm_slots(host, settings, built_image, accel):
    """Two warm slots of linux-test, made by the project's own code when missing or stale, so
    the e2e tests start their VMs warm (the default); the tests that need a cold boot ask for it."""
    from runner.vm.warming import warm_image

    return warm_image(host, settings, built_image, 2, accel, progress=lambda _line: None)


@pytest.fixture(scope="session")
def linux_image(built_image, warm_slots) -> Image:
    """The linux-test image with its warm slots: what every test that boots a VM asks for."""
    return built_image


@pytest.fixture(scope="session")
def desktop_image(settings, host, accel, request) -> Image:
    """linux-desktop, built by its own recipe if the cache lacks it (while the unit tests run,
    tests/image_prefetch.py), with one warm slot (its apps warmed): the tests that need the
    benchmarks' desktop ask for it."""
    from runner.vm.warming import warm_image

    wait_for_prefetched(request.config, LINUX_DESKTOP)
    image, _built = build_image(Catalog(settings.images_dir), LINUX_DESKTOP, progress=lambda _line: None)
    warm_image(host, settings, image, 1, accel, progress=lambda _line: None)
    return image


@pytest.fixture(scope="session")
def desktop_pool_of_two(desktop_image, host, settings, accel) -> Image:
    """linux-desktop with a second warm slot, for the full tier's runs at `--vm-pool 2`: a pool
    with a slot that has no warm state starts every VM cold, which made the 19-task validate take
    48 min instead of ~10. The default tier pays for one slot only."""
    from runner.vm.warming import warm_image

    warm_image(host, settings, desktop_image, 2, accel, progress=lambda _line: None)
    return desktop_image
