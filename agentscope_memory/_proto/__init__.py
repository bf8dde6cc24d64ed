"""Generated protobuf and gRPC code (written by `make gen`, never edited by hand)."""
