"""Decodes a TensorBoard event file with an independent reader, for libra's export tests.

The record framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data) is
checked here with a CRC-32C of this file's own; the Event and Summary messages are decoded by
Debian's python3-protobuf from message definitions written from TensorFlow's published
event.proto and summary.proto (only the fields libra writes). Prints one JSON object per event:
{"wall_time": ..., "step": ..., "file_version": ...} or {..., "values": {tag: value}}.
Exits 1 with a message on any malformed byte.

Usage: python3 tfevents_decode.py FILE
"""

import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def messages():
    """Event and Summary, as event.proto and summary.proto define them (the fields used)."""
    f = descriptor_pb2.FileDescriptorProto()
    f.name = "libra_test_event.proto"
    f.package = "tensorboard"
    f.syntax = "proto3"
    T = descriptor_pb2.FieldDescriptorProto

    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)

    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE,
                      type_name=".tensorboard.Value", label=T.LABEL_REPEATED)

    event = f.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL,
                    oneof_index=0)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE,
                    type_name=".tensorboard.Summary", label=T.LABEL_OPTIONAL, oneof_index=0)

    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("tensorboard.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def main(path):
    Event = messages()
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            sys.exit("truncated record header at byte %d" % at)
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked(header):
            sys.exit("bad length CRC at byte %d" % at)
        body = data[at + 12:at + 12 + length]
        if len(body) != length or at + 16 + length > len(data):
            sys.exit("truncated record at byte %d" % at)
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if body_crc != masked(body):
            sys.exit("bad data CRC at byte %d" % at)
        event = Event()
        event.ParseFromString(body)
        out = {"wall_time": event.wall_time, "step": event.step}
        if event.WhichOneof("what") == "file_version":
            out["file_version"] = event.file_version
        else:
            out["values"] = {v.tag: v.simple_value for v in event.summary.value}
        print(json.dumps(out, sort_keys=True))
        at += 16 + length


if __name__ == "__main__":
    main(sys.argv[1])
