"""The KVM probe's guest: one boot sector that cu-run writes itself, so the probe reads no kernel.

Why not a kernel: the host's /boot/vmlinuz-* is 0600 root on Ubuntu, and no image's kernel may
be built yet. Why more than a "hello" in real mode: nested KVM can run a BIOS and a real-mode
boot sector and still never get a kernel going. On a host whose /dev/kvm is PVM (kvm_pvm, with
no VT-x under it) a guest's ring-0 code is emulated an instruction at a time, about a million a
second: SeaBIOS takes 3 s, a real-mode hello then prints, and a Debian kernel spends minutes in
its decompressor before it prints "Linux version".

So the sector does what a kernel does first, and says on COM1 how far it got, a letter a step
(STEPS), before the banner:
  L  from real mode straight into 64-bit long mode with paging (the first 64 MiB identity-mapped)
  I  20 timer interrupts (the PIT at 1 kHz, through the PIC moved off the CPU's exceptions),
     halting between them
  M  a write into every 4 KiB page of 32 MiB
and then a count down from 2**26 (a two-instruction loop), a kernel's early work for a CPU: some
30 ms where KVM works, about 0.2 s under TCG, a minute or more where ring 0 is emulated. On that
PVM host the sector prints L, I and M within a second of SeaBIOS and then never finishes the count
in the probe's time, while under TCG the whole boot takes 0.3 s (measured on 2 cores).

The bytes are x86 machine code, each instruction on its own line with its assembly beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

LOAD_ADDRESS = 0x7C00  # where a BIOS puts a boot sector, and runs it in real mode
BANNER = b"cu-run probe ok"
STEPS = {
    "L": "entered 64-bit long mode with paging",
    "I": "took timer interrupts",
    "M": "wrote 32 MiB of memory",
}

# Below the boot sector, in memory a BIOS leaves free.
PML4, PDPT, PD = 0x1000, 0x2000, 0x3000  # the page tables: one of each level
IDT = 0x4000  # 33 gates of 16 bytes: the exceptions (left empty) and IRQ0 at 0x20
TIMER_VECTOR = 0x20
TICKS = 20
WORK_FROM, WORK_TO = 0x0040_0000, 0x0240_0000  # the 32 MiB written
COUNT = 1 << 26

CODE64, DATA64 = 0x08, 0x10  # selectors into the GDT below


@dataclass(frozen=True)
class _Ref:
    """A place's address, filled in once every place is known: absolute in SIZE bytes, or a
    short jump's displacement (from the end of its one byte)."""

    place: str
    size: int
    relative: bool


def _u8(value: int) -> bytes:
    return value.to_bytes(1, "little")


def _u16(value: int) -> bytes:
    return value.to_bytes(2, "little")


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _at(place: str, size: int) -> _Ref:
    """PLACE's absolute address (all of them lie below 64 KiB, so 2 bytes hold one)."""
    return _Ref(place, size, relative=False)


def _to(place: str) -> _Ref:
    return _Ref(place, 1, relative=True)


class _Code:
    """Machine code laid out from LOAD_ADDRESS, with named places."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.places: dict[str, int] = {}
        self.refs: list[tuple[int, _Ref]] = []

    def op(self, *parts: str | bytes | _Ref) -> None:
        """One instruction (or datum): hex opcode bytes, immediates, and references to places."""
        for part in parts:
            if isinstance(part, _Ref):
                self.refs.append((len(self.out), part))
                self.out += bytes(part.size)
            else:
                self.out += bytes.fromhex(part) if isinstance(part, str) else part

    def place(self, name: str) -> None:
        self.places[name] = LOAD_ADDRESS + len(self.out)

    def finish(self) -> bytes:
        for offset, ref in self.refs:
            target = self.places[ref.place]
            value = target - (LOAD_ADDRESS + offset + ref.size) if ref.relative else target
            self.out[offset:offset + ref.size] = value.to_bytes(ref.size, "little", signed=ref.relative)
        if len(self.out) > 510:
            raise ValueError(f"the probe's boot sector holds {len(self.out)} bytes, more than 510")
        return bytes(self.out) + bytes(510 - len(self.out)) + b"\x55\xaa"  # the BIOS's boot signature


def boot_sector() -> bytes:
    """The probe's 512-byte boot disk."""
    code = _Code()
    _real_mode(code)
    _page_tables(code)
    _interrupts(code)
    _enter_long_mode(code)
    _steps(code)
    _timer_handler(code)
    _data(code)
    return code.finish()


def _real_mode(c: _Code) -> None:
    c.op("fa")  # cli: until the IDT below is ours
    c.op("31 c0")  # xor ax, ax
    c.op("8e d8")  # mov ds, ax
    c.op("8e c0")  # mov es, ax
    c.op("8e d0")  # mov ss, ax
    c.op("bc", _u16(LOAD_ADDRESS))  # mov sp, 0x7c00: the stack grows down below the code
    c.op("fc")  # cld
    c.op("bf", _u16(PML4))  # mov di, PML4
    c.op("b9", _u16((IDT + 0x1000 - PML4) // 2))  # mov cx, words from PML4 to the IDT's end
    c.op("f3 ab")  # rep stosw: zero the page tables and the IDT


def _page_tables(c: _Code) -> None:
    """PML4[0] -> PDPT[0] -> PD, whose 32 entries map 2 MiB pages: virtual = physical."""
    c.op("c7 06", _u16(PML4), _u16(PDPT | 3))  # mov word [PML4], PDPT | present | writable
    c.op("c7 06", _u16(PDPT), _u16(PD | 3))  # mov word [PDPT], PD | present | writable
    c.op("bf", _u16(PD))  # mov di, PD
    c.op("66 b8", _u32(0x83))  # mov eax, 0x83: address 0 | 2 MiB page | writable | present
    c.op("b9", _u16(32))  # mov cx, 32
    c.place("map")
    c.op("66 89 05")  # mov [di], eax
    c.op("66 05", _u32(0x20_0000))  # add eax, 2 MiB
    c.op("83 c7 08")  # add di, 8
    c.op("e2", _to("map"))  # loop map


def _interrupts(c: _Code) -> None:
    """IRQ0 -> vector 0x20 -> tick. The BIOS leaves the PIC's IRQ0 on vector 8, which in protected
    mode is the double fault, so the PIC is told its base again, as a kernel does."""
    gate = IDT + TIMER_VECTOR * 16
    c.op("c7 06", _u16(gate), _at("tick", 2))  # mov word [gate], tick (offset bits 0-15)
    c.op("66 c7 06", _u16(gate + 2), _u32(0x8E00_0000 | CODE64))  # selector, present 64-bit interrupt gate
    c.op("0f 01 16", _at("gdtr", 2))  # lgdt [gdtr]
    c.op("0f 01 1e", _at("idtr", 2))  # lidt [idtr]
    for port, value in (
        (0x20, 0x11), (0xA0, 0x11),  # ICW1 to both PICs: initialise, ICW4 follows
        (0x21, 0x20), (0xA1, 0x28),  # ICW2: their vector bases
        (0x21, 0x04), (0xA1, 0x02),  # ICW3: the second PIC hangs off IRQ2
        (0x21, 0x01), (0xA1, 0x01),  # ICW4: 8086 mode
        (0x21, 0xFE), (0xA1, 0xFF),  # masks: IRQ0 alone
        (0x43, 0x34),  # PIT channel 0: rate generator, low byte then high byte
    ):
        c.op("b0", _u8(value))  # mov al, value
        c.op("e6", _u8(port))  # out port, al
    c.op("b8", _u16(1193))  # mov ax, 1193: 1.193182 MHz / 1193 = 1 kHz
    c.op("e6 40")  # out 0x40, al
    c.op("88 e0")  # mov al, ah
    c.op("e6 40")  # out 0x40, al


def _enter_long_mode(c: _Code) -> None:
    """Real mode to long mode in one step, skipping 32-bit protected mode: PAE, CR3, EFER.LME,
    then paging and protection together."""
    c.op("0f 20 e0")  # mov eax, cr4
    c.op("66 83 c8 20")  # or eax, 0x20: PAE
    c.op("0f 22 e0")  # mov cr4, eax
    c.op("66 b8", _u32(PML4))  # mov eax, PML4
    c.op("0f 22 d8")  # mov cr3, eax
    c.op("66 b9", _u32(0xC000_0080))  # mov ecx, EFER
    c.op("0f 32")  # rdmsr
    c.op("66 0d", _u32(0x100))  # or eax, LME
    c.op("0f 30")  # wrmsr
    c.op("0f 20 c0")  # mov eax, cr0
    c.op("66 0d", _u32(0x8000_0001))  # or eax, PG | PE
    c.op("0f 22 c0")  # mov cr0, eax
    c.op("ea", _at("long", 2), _u16(CODE64))  # jmp far CODE64:long


def _say(c: _Code, letter: str) -> None:
    c.op("b0", _u8(ord(letter)))  # mov al, letter
    c.op("ee")  # out dx, al: dx holds COM1's port


def _steps(c: _Code) -> None:
    c.place("long")  # 64-bit code from here on
    c.op("66 b8", _u16(DATA64))  # mov ax, DATA64
    c.op("8e d8")  # mov ds, ax
    c.op("8e c0")  # mov es, ax
    c.op("8e d0")  # mov ss, ax
    c.op("66 ba", _u16(0x3F8))  # mov dx, COM1
    _say(c, "L")
    c.place("wait")
    c.op("fb")  # sti: it takes effect after the next instruction, so no tick slips in before hlt
    c.op("f4")  # hlt: until an interrupt
    c.op("fa")  # cli
    c.op("83 3c 25", _at("ticks", 4), _u8(TICKS))  # cmp dword [ticks], TICKS
    c.op("72", _to("wait"))  # jb wait
    _say(c, "I")
    c.op("bf", _u32(WORK_FROM))  # mov edi, WORK_FROM
    c.place("touch")
    c.op("89 3f")  # mov [rdi], edi
    c.op("81 c7", _u32(0x1000))  # add edi, 4 KiB
    c.op("81 ff", _u32(WORK_TO))  # cmp edi, WORK_TO
    c.op("72", _to("touch"))  # jb touch
    _say(c, "M")
    c.op("b9", _u32(COUNT))  # mov ecx, COUNT
    c.place("count")
    c.op("ff c9")  # dec ecx
    c.op("75", _to("count"))  # jnz count
    c.op("be", _at("banner", 4))  # mov esi, banner
    c.place("print")
    c.op("ac")  # lodsb
    c.op("84 c0")  # test al, al
    c.op("74", _to("done"))  # jz done
    c.op("ee")  # out dx, al
    c.op("eb", _to("print"))  # jmp print
    c.place("done")
    c.op("f4")  # hlt: only the timer wakes it, and QEMU is killed once the banner is read
    c.op("eb", _to("done"))  # jmp done


def _timer_handler(c: _Code) -> None:
    c.place("tick")
    c.op("50")  # push rax
    c.op("ff 04 25", _at("ticks", 4))  # inc dword [ticks]
    c.op("b0 20")  # mov al, 0x20
    c.op("e6 20")  # out 0x20, al: end of interrupt, to the PIC
    c.op("58")  # pop rax
    c.op("48 cf")  # iretq


def _data(c: _Code) -> None:
    c.op(bytes(-(LOAD_ADDRESS + len(c.out)) % 8))  # the GDT 8-aligned
    c.place("gdt")
    c.op(_u64(0))  # the null descriptor
    c.op(_u64(0x0020_9A00_0000_0000))  # CODE64: present, ring 0, code, long mode
    c.op(_u64(0x0000_9200_0000_0000))  # DATA64: present, ring 0, data, writable
    c.place("gdtr")
    c.op(_u16(3 * 8 - 1), _at("gdt", 4))  # the GDT's limit and base, for lgdt
    c.place("idtr")
    c.op(_u16((TIMER_VECTOR + 1) * 16 - 1), _u32(IDT))  # the IDT's limit and base, for lidt
    c.place("ticks")
    c.op(_u32(0))
    c.place("banner")
    c.op(BANNER + b"\n\0")
