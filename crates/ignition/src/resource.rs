//! Resources: decode, decompress and verify the bytes of a `source`.
