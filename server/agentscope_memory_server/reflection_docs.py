"""Server reflection that keeps the .proto comments, so `grpcurl describe` is the manual.

grpcio-reflection serialises each file with `FileDescriptor.CopyToProto`, which drops source
info (and with it every comment). `make gen` writes a descriptor set that keeps it; the pool
below hands reflection file descriptors whose `CopyToProto` copies those documented protos.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool


class _DocumentedFile:
    def __init__(self, descriptor: Any, pool: DocumentedPool) -> None:
        self._descriptor = descriptor
        self._pool = pool
        self.name = descriptor.name

    @property
    def dependencies(self) -> list[_DocumentedFile]:
        return [_DocumentedFile(d, self._pool) for d in self._descriptor.dependencies]

    def CopyToProto(self, proto: descriptor_pb2.FileDescriptorProto) -> None:
        documented = self._pool.protos.get(self.name)
        if documented is not None:
            proto.CopyFrom(documented)
        else:
            self._descriptor.CopyToProto(proto)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._descriptor, name)


class DocumentedPool:
    """A descriptor pool for reflection built from the documented descriptor set."""

    def __init__(self, descriptor_set: bytes) -> None:
        self._pool = descriptor_pool.DescriptorPool()
        self.protos: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        for file in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file:
            self._pool.Add(file)
            self.protos[file.name] = file

    def add(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        """Adds a file that is not in the descriptor set (e.g. reflection v1)."""
        self._pool.Add(file)
        self.protos[file.name] = file

    # Health and reflection are not in our descriptor set; they come from the default pool.
    def _find(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._pool, method)(*args)
        except KeyError:
            return getattr(descriptor_pool.Default(), method)(*args)

    def FindFileByName(self, name: str) -> _DocumentedFile:
        return _DocumentedFile(self._find("FindFileByName", name), self)

    def FindFileContainingSymbol(self, symbol: str) -> _DocumentedFile:
        try:
            found = self._find("FindFileContainingSymbol", symbol)
        except KeyError:
            # The upb pool finds services, messages and fields by name but not methods, which
            # `grpcurl describe pkg.Service.Method` asks for: found through their service.
            service_name, _, method = symbol.rpartition(".")
            service = self._find("FindServiceByName", service_name)
            if method not in service.methods_by_name:
                raise
            found = service.file
        return _DocumentedFile(found, self)

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self._find(name, *args)


def documented_pool() -> DocumentedPool:
    data = (resources.files("agentscope_memory._proto") / "agentscope" / "descriptor_set.binpb").read_bytes()
    return DocumentedPool(data)
