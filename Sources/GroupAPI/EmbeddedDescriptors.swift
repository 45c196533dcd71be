import CProtobufC  // first, as in every file of the module: it owns protobuf-c.h's declarations
import GroupProtoC

/// The descriptors of the API, embedded at build time: `scripts/genproto.py` writes the serialized
/// `google.protobuf.FileDescriptorSet` of every file in `Protos/` and of every file they import
/// (dependencies first, without source info) into `Sources/GroupProtoC/descriptor_set.c`.
public enum EmbeddedDescriptors {
    /// The serialized `google.protobuf.FileDescriptorSet`.
    public static let fileDescriptorSet: [UInt8] = Array(
        UnsafeBufferPointer(start: groupd_descriptor_set_bytes(), count: groupd_descriptor_set_size()))
}
