"""VNC's own authentication (RFB 3.8, security type 2): the response to a server's challenge."""

from __future__ import annotations

try:  # cryptography >= 43 keeps DES among its "decrepit" ciphers
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
except ImportError:  # pragma: no cover - older cryptography
    from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """The 16-byte answer to CHALLENGE: the challenge DES-encrypted under the password.

    VNC reads only the first 8 bytes of the password, zero-padded, and uses each byte with
    its bits in reverse order as the key (a quirk of the original implementation that
    every server keeps). A TripleDES key of three equal halves is single DES.
    """
    key = bytes(_reverse_bits(b) for b in password.encode("latin-1")[:8].ljust(8, b"\0"))
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


def _reverse_bits(byte: int) -> int:
    return int(f"{byte:08b}"[::-1], 2)
