"""What reading a variable-length string attribute will cost, measured before it is read.

Each element of a variable-length string attribute is stored as a descriptor: the string's length, and the
address and index of the global-heap object holding it. HDF5 materialises each element on reading, so
elements that all point to one large heap object cost that object's size once per element, while the
attribute declares only descriptors (h5a.AttrID.get_storage_size). HDF5 has no call that reads the
descriptors alone, so they are read here from the object header, which h5py locates (h5o.get_info), as
the HDF5 File Format Specification 3.0 lays it out: "Version 1 Object Headers" (what h5py writes by
default, and so Keras), "Header Message 0x0010: Object Header Continuation", "Header Message 0x000C:
Attribute", and "Disk Format: Level 2A2 ... Variable-length" (a 4-byte length, then the heap ID).
HDF5 itself refuses a heap object whose size differs from its descriptor's length
(H5Fint.c:H5F__blob_get, "Expected global heap object size does not match").
"""

from __future__ import annotations

import os
import struct

import h5py

from steps.lib.errors import StepError

ATTRIBUTE_MESSAGE = 0x000C
CONTINUATION_MESSAGE = 0x0010
MAX_HEADER_BLOCKS = 64  # an object header and its continuations; Keras's have one or two
MAX_HEADER_BYTES = 1 << 20


def _padded(size: int) -> int:
    return (size + 7) & ~7


def _header_messages(stream: int, address: int, size: int, base: int, offsets: int):
    """(type, flags, data) of every message of a version 1 object header, continuations included."""
    blocks, seen, total = [(address + 16, size)], 0, 0
    end = os.fstat(stream).st_size
    while blocks:
        start, length = blocks.pop(0)
        seen, total = seen + 1, total + length
        if seen > MAX_HEADER_BLOCKS or total > MAX_HEADER_BYTES:
            raise StepError("an object header is too large")
        if base + start + length > end:
            raise StepError("an object header runs past the end of the file")
        block = os.pread(stream, length, base + start)
        position = 0
        while position + 8 <= length:
            kind, data_size, flags = struct.unpack_from("<HHB", block, position)
            data = block[position + 8 : position + 8 + data_size]
            if len(data) != data_size:
                raise StepError("an object header message runs past its block")
            if kind == CONTINUATION_MESSAGE:
                if data_size < 2 * offsets:
                    raise StepError("a damaged object header continuation")
                blocks.append(
                    (
                        int.from_bytes(data[:offsets], "little"),
                        int.from_bytes(data[offsets : 2 * offsets], "little"),
                    )
                )
            yield kind, flags, data
            position += 8 + data_size


def _attribute_data(message: bytes) -> tuple[str, bytes]:
    """An attribute message's name and the bytes of its data (versions 1 to 3)."""
    version = message[0] if message else 0
    if version not in (1, 2, 3) or len(message) < 8:
        raise StepError("an attribute message of an unknown version")
    name_size, type_size, space_size = struct.unpack_from("<HHH", message, 2)
    if version == 1:
        start, sizes = 8, (_padded(name_size), _padded(type_size), _padded(space_size))
    else:
        if message[1] & 0b11:  # a shared datatype or dataspace
            raise StepError("an attribute with a shared datatype or dataspace")
        start, sizes = (8 if version == 2 else 9), (name_size, type_size, space_size)
    name = message[start : start + name_size].split(b"\0", 1)[0]
    return name.decode("utf-8", "replace"), message[start + sum(sizes) :]


def variable_string_bytes(obj: h5py.HLObject, name: str, items: int) -> int:
    """The bytes reading `obj`'s variable-length string attribute `name` of `items` elements would
    materialise: the sum of its elements' stored lengths. StepError where the descriptors cannot be
    found in a version 1 object header (the layout h5py and Keras write)."""
    info = h5py.h5o.get_info(obj.id)
    if info.hdr.version != 1:
        raise StepError(f"attribute {name}: variable-length strings outside a version 1 header")
    plist = obj.file.id.get_create_plist()
    offsets, _ = plist.get_sizes()
    base = plist.get_userblock()
    descriptor = 4 + offsets + 4  # length, heap collection address, object index
    stream = os.open(obj.file.filename, os.O_RDONLY | os.O_CLOEXEC)
    try:
        prefix = os.pread(stream, 16, base + info.addr)
        if len(prefix) != 16 or prefix[0] != 1:
            raise StepError("not a version 1 object header")
        (size,) = struct.unpack_from("<I", prefix, 8)
        found = [
            data
            for kind, _, message in _header_messages(stream, info.addr, size, base, offsets)
            if kind == ATTRIBUTE_MESSAGE
            for stored, data in [_attribute_data(message)]
            if stored == name
        ]
    finally:
        os.close(stream)
    if len(found) != 1 or len(found[0]) < items * descriptor:
        raise StepError(f"attribute {name} is not stored as h5py writes it")
    return sum(struct.unpack_from("<I", found[0], index * descriptor)[0] for index in range(items))
