//! A writer of `.gguf` headers for tests: the bytes of files good and bad, field by field.

/// Writes the fields of a `.gguf` header, little-endian.
#[derive(Default)]
pub(crate) struct Writer {
    /// The bytes written so far.
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    /// The magic, the version and both counts.
    pub(crate) fn header(version: u32, n_tensors: u64, n_kvs: u64) -> Writer {
        let mut w = Writer::default();
        w.raw(b"GGUF").u32(version).u64(n_tensors).u64(n_kvs);
        w
    }

    pub(crate) fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub(crate) fn string(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// A key and its value type (the value follows).
    pub(crate) fn key(&mut self, key: &str, ty: u32) -> &mut Self {
        self.string(key).u32(ty)
    }

    pub(crate) fn tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ggml_type: u32,
        offset: u64,
    ) -> &mut Self {
        self.string(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ggml_type).u64(offset)
    }
}
