"""A PNG's size and how much of it is one colour: decoded with zlib alone (stdlib only: the
guest's python3). 8-bit RGB and RGBA, the five filters."""

import struct
import sys
import zlib

MAX_PIXELS = 4096 * 4096


def decode(path):
    data = open(path, "rb").read(64 * 2**20)
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = header[:4]
    if depth != 8 or colour not in (2, 6) or header[6] != 0:
        raise ValueError(f"a PNG of depth {depth}, colour type {colour}, interlace {header[6]}: not 8-bit RGB(A)")
    if width * height > MAX_PIXELS:
        raise ValueError(f"{width}x{height} is too large to check")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompressobj().decompress(idat, width * height * channels + height)
    stride, rows, previous = width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(line)
        previous = line
    return width, height, channels, rows


if __name__ == "__main__":
    try:
        width, height, channels, rows = decode(sys.argv[1])
    except (OSError, ValueError, struct.error, zlib.error, TypeError) as exc:
        print(f"not a readable PNG: {exc}")
        sys.exit(0)
    red = sum(1 for row in rows for i in range(0, len(row), channels) if tuple(row[i:i + 3]) == (255, 0, 0))
    print(f"{width}x{height} red={red * 100 // (width * height)}%")
