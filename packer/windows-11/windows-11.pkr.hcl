# Windows 11 golden image for cu-run: an air-gapped build with the qemu builder.
#
# Every input is a local file; `cu-run image build windows-11` checks each one (present,
# sha256, free disk, packer, OVMF) before it calls packer with these variables. Nothing is
# downloaded: the ISO's checksum is verified by packer too, the rest by cu-run.
#
# Works with Debian's packer 1.6.6 (qemu builder built in) and with a current Packer whose
# qemu plugin is installed in its plugin folder (no required_plugins block, so an
# air-gapped packer never tries to fetch it). UEFI comes from OVMF through pflash
# (-blockdev + -machine pflash0/1): a -drive or -device in qemuargs would make packer
# drop its own disk and CD arguments. The virtio drivers travel on the CUSETUP CD, not as
# a second ISO, for the same reason. Windows 11's TPM and Secure Boot checks are bypassed with LabConfig (see
# autounattend.xml): clones carry no TPM state to copy or to diverge.

variable "iso_path" {
  type        = string
  description = "Windows 11 ISO (an evaluation ISO works)"
}
variable "iso_sha256" {
  type = string
}
variable "autounattend" {
  type        = string
  description = "the answer file with the password filled in (cu-run writes it from autounattend.xml)"
}
variable "drivers_dir" {
  type        = string
  description = "virtio storage, network and input drivers for Windows 11, extracted from the virtio-win ISO by cu-run"
}
variable "python_installer" {
  type        = string
  description = "python-3.13.x-amd64.exe, installed offline"
}
variable "evals_seed_dir" {
  type        = string
  description = "seed files copied to C:\\evals"
}
variable "ovmf_code" {
  type    = string
  default = "/usr/share/OVMF/OVMF_CODE_4M.fd"
}
variable "ovmf_vars" {
  type        = string
  description = "a writable copy of OVMF_VARS for this build (cu-run makes it)"
}
variable "output_dir" {
  type = string
}
variable "accelerator" {
  type    = string
  default = "kvm"
}
variable "cpu_model" {
  type        = string
  default     = "host"
  description = "host under KVM; max under TCG (Windows 11 24H2 needs x86-64-v2)"
}
variable "memory_mib" {
  type    = number
  default = 4096
}
variable "cpus" {
  type    = number
  default = 2
}
variable "disk_size" {
  type    = string
  default = "64G"
}
variable "admin_user" {
  type    = string
  default = "cu"
}
variable "admin_password" {
  type = string
}
variable "verifier_user" {
  type        = string
  default     = "cu-verify"
  description = "the administrator the runner verifies as; admin_user ends a standard user"
}
variable "verifier_password" {
  type = string
}
variable "screen_width" {
  type    = number
  default = 1280
}
variable "screen_height" {
  type    = number
  default = 800
}
variable "winrm_host_port" {
  type        = number
  default     = 5995
  description = "the host port forwarded to the guest's WinRM: cu-run copies setup's logs through it"
}
variable "serial_log" {
  type        = string
  default     = "/dev/null"
  description = "where the build VM's serial port writes (kept when a build fails)"
}
variable "winrm_timeout" {
  type        = string
  default     = "2h"
  description = "how long packer waits for WinRM after boot: Windows setup under KVM takes 20-40 min; under TCG, hours"
}


source "qemu" "windows-11" {
  iso_url          = var.iso_path
  iso_checksum     = "sha256:${var.iso_sha256}"
  output_directory = var.output_dir
  vm_name          = "disk.qcow2"
  format           = "qcow2"
  disk_size        = var.disk_size
  # -drive if=virtio: QEMU makes it a virtio-blk-pci on the root bus, after the VGA (00:01.0)
  # and the NIC (packer's one -device, 00:02.0): 00:03.0, transitional (PCI id 1af4:1001), as a
  # device on a root bus is. Windows installs its boot driver for that device at that address,
  # so every episode's domain puts its disk there too (runner/hypervisor/domain_xml.py); a
  # -device added to qemuargs would move it (tests/unit/test_windows_disk_identity.py).
  disk_interface   = "virtio"
  disk_cache       = "unsafe"
  disk_discard     = "unmap"
  disk_compression = true
  accelerator      = var.accelerator
  machine_type     = "q35"
  memory           = var.memory_mib
  cpus             = var.cpus
  net_device       = "virtio-net"
  headless         = true
  vnc_bind_address = "127.0.0.1"
  host_port_min    = var.winrm_host_port
  host_port_max    = var.winrm_host_port

  # The answer file, the first-logon script and the virtio drivers ride on a CD labelled
  # CUSETUP; Windows Setup finds autounattend.xml at the root of any removable medium.
  cd_files = [var.autounattend, "${path.root}/setup/", var.drivers_dir]
  cd_label = "CUSETUP"

  qemuargs = [
    ["-blockdev", "node-name=ovmf-code,driver=file,filename=${var.ovmf_code},read-only=on"],
    ["-blockdev", "node-name=ovmf-vars,driver=file,filename=${var.ovmf_vars}"],
    ["-machine", "type=q35,accel=${var.accelerator},pflash0=ovmf-code,pflash1=ovmf-vars"],
    ["-cpu", var.cpu_model],
    # One socket of CPUS cores, as every episode's domain has: packer's own -smp would be
    # cpus=N,sockets=N (1.6.6) or QEMU's default for N (the plugin), and Windows client editions
    # use one socket (Home) or two (Pro).
    ["-smp", "cpus=${var.cpus},sockets=1,cores=${var.cpus},threads=1"],
    # The build VM's network: QEMU user mode with restrict=on, so the guest reaches nothing but
    # the WinRM forward packer connects through. A connected host would otherwise let Windows
    # Update, the Store and Edge download during setup, and two builds would differ. A -netdev
    # here replaces packer's own; packer still adds the virtio-net device that uses it.
    ["-netdev", "user,id=user.0,restrict=on,hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:5985"],
    ["-serial", "file:${var.serial_log}"],
  ]

  # "Press any key to boot from CD or DVD" shows for a few seconds, and when it comes depends on
  # how fast OVMF starts. A miss falls through to the empty disk and PXE, so a key goes in every
  # second for ten seconds; keys after the boot manager has started are ignored.
  boot_wait    = "1s"
  boot_command = ["<enter><wait><enter><wait><enter><wait><enter><wait><enter><wait><enter><wait><enter><wait><enter><wait><enter><wait><enter>"]

  communicator     = "winrm"
  winrm_username   = var.admin_user
  winrm_password   = var.admin_password
  winrm_use_ntlm   = true
  winrm_timeout    = var.winrm_timeout
  # The last command packer runs as the desktop user, while it is still an administrator:
  # demote it (a standard user in every clone), then shut down. A failed demotion does not
  # shut down, so the build fails at shutdown_timeout instead of making an image with an
  # administrator at the desktop.
  shutdown_command = "powershell.exe -NoProfile -ExecutionPolicy Bypass -Command \"$ErrorActionPreference = 'Stop'; Remove-LocalGroupMember -Group 'Administrators' -Member '${var.admin_user}'; shutdown.exe /s /t 5 /f /d p:4:1 /c 'cu-run image build'\""
  shutdown_timeout = "1h"
}

build {
  sources = ["source.qemu.windows-11"]

  provisioner "file" {
    source      = var.python_installer
    destination = "C:\\cu-run\\python-installer.exe"
  }
  provisioner "file" {
    source      = "${path.root}/../../guest_agent/windows/"
    destination = "C:\\cu-run\\guest-agent"
  }
  provisioner "file" {
    source      = "${path.root}/session/"
    destination = "C:\\cu-run\\session"
  }
  provisioner "file" {
    source      = "${var.evals_seed_dir}/"
    destination = "C:\\evals"
  }

  provisioner "powershell" {
    environment_vars = [
      "CU_USER=${var.admin_user}",
      "CU_PASSWORD=${var.admin_password}",
      "CU_SCREEN_WIDTH=${var.screen_width}",
      "CU_SCREEN_HEIGHT=${var.screen_height}",
    ]
    scripts = [
      "${path.root}/scripts/install-python.ps1",
      "${path.root}/scripts/autologon.ps1",
      "${path.root}/scripts/quiet-desktop.ps1",
      "${path.root}/scripts/install-guest-agent.ps1",
      "${path.root}/scripts/install-session-tasks.ps1",
      "${path.root}/scripts/check-machine-path.ps1",
    ]
  }

  provisioner "windows-restart" {
    restart_timeout = "1h"
  }

  provisioner "powershell" {
    scripts = ["${path.root}/scripts/cleanup.ps1"]
  }

  provisioner "powershell" {
    environment_vars = [
      "CU_USER=${var.admin_user}",
      "CU_VERIFIER_USER=${var.verifier_user}",
      "CU_VERIFIER_PASSWORD=${var.verifier_password}",
    ]
    scripts = ["${path.root}/scripts/accounts.ps1"]
  }
}
