"""Admission control: a pool is capped to what the host's memory holds, with one line saying so."""

from runner.vm.admission import HOST_RESERVE_MIB, admit, available_mib, per_vm_mib, vms_that_fit


def test_a_vm_costs_its_memory_the_translation_cache_under_tcg_and_qemus_overhead():
    assert per_vm_mib(1024, "tcg") == 1024 + 256 + 128
    assert per_vm_mib(4096, "kvm") == 4096 + 128


def test_the_pool_is_capped_to_what_fits_and_never_below_one():
    available = HOST_RESERVE_MIB + 3 * per_vm_mib(1024, "tcg") + 100
    assert vms_that_fit(1024, "tcg", available) == 3
    capped = admit(8, 1024, "tcg", available)
    assert capped.capped and capped.admitted == 3
    assert "--vm-pool 8 capped at 3" in capped.notice("linux-test")
    assert not admit(2, 1024, "tcg", available).capped
    assert admit(4, 1024, "tcg", 500).admitted == 1


def test_memavailable_is_read(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n")
    assert available_mib(meminfo) == 20000


def test_spare_vms_get_only_the_room_left_beside_the_pool():
    available = HOST_RESERVE_MIB + 3 * per_vm_mib(1024, "tcg") + 100
    assert admit(1, 1024, "tcg", available).room_beside == 2
    assert admit(3, 1024, "tcg", available).room_beside == 0
    assert admit(8, 1024, "tcg", available).room_beside == 0  # capped at 3: none beside
    assert admit(1, 1024, "tcg", 500).room_beside == 0  # one VM admitted regardless, none beside


def test_doctor_counts_cores_as_well_as_memory(tmp_path, monkeypatch):
    """A 2-core TCG host whose memory holds 15 VMs runs 2 of them at full speed, and says so."""
    from test_catalog import make_image

    from runner.vm import doctor
    from runner.config import Settings

    make_image(tmp_path / "images")
    monkeypatch.setattr(doctor, "available_mib", lambda: 15 * 700 + 2048)
    [check] = doctor._capacity(Settings.resolve(tmp_path), "tcg", cores=2)
    assert "2 cores run 2 at full speed" in check.detail and "memory holds" in check.detail
    assert "share the cores" in check.fix
