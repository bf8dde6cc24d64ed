"""Conversions between the wire (protobuf) and library types: `to_proto` and `from_proto`, one
module per direction, shared by the server and the Python clients."""
