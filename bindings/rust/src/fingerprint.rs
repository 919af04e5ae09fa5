//! Structural keys: the streaming fingerprint builder and the graph helper
//! (XXH3-128 with framed fields; see "Structural fingerprints" in ccache.h
//! for the exact encoding, identical in every process and on every machine).

use crate::ffi;
use crate::status::{check, Status};
use crate::{Key, StrongKey};
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;

/// A fingerprint builder.  Each append frames its field (type tag, length),
/// so different sequences of fields never hash the same bytes.  A failed
/// append (a shape of rank above 16) poisons the builder: [`Fingerprint::finish`]
/// then returns `EINVAL`, so a chain of appends is checked once, at the end.
///
/// ```
/// use ccache::Fingerprint;
/// let mut fp = Fingerprint::new();
/// fp.str("matmul").shape(1, &[128, 576]).shape(1, &[576, 576]).str("cpu");
/// let key = fp.finish().unwrap();
/// let mut again = Fingerprint::new();
/// again.str("matmul").shape(1, &[128, 576]).shape(1, &[576, 576]).str("cpu");
/// assert_eq!(again.finish().unwrap(), key);
/// ```
///
/// Cloning copies the state: the clone continues independently (e.g. to fork
/// a common prefix).  One builder is used by one thread at a time (`&mut`).
#[derive(Clone)]
pub struct Fingerprint {
    fp: Box<ffi::ccache_fp>,
}

impl Default for Fingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprint {
    /// A fresh builder.
    pub fn new() -> Fingerprint {
        let mut fp = Box::new(ffi::ccache_fp { opaque_: [0; 1024] });
        // SAFETY: a caller-owned builder of the right size and alignment.
        unsafe { ffi::ccache_fp_init(&mut *fp) };
        Fingerprint { fp }
    }

    /// Appends an unsigned 64-bit integer.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        // SAFETY: an initialised builder.
        unsafe { ffi::ccache_fp_u64(&mut *self.fp, v) };
        self
    }

    /// Appends a signed 64-bit integer (its own tag: `i64(1)` differs from `u64(1)`).
    pub fn i64(&mut self, v: i64) -> &mut Self {
        // SAFETY: an initialised builder.
        unsafe { ffi::ccache_fp_i64(&mut *self.fp, v) };
        self
    }

    /// Appends a double by its bit pattern (`-0.0` differs from `0.0`).
    pub fn f64(&mut self, v: f64) -> &mut Self {
        // SAFETY: an initialised builder.
        unsafe { ffi::ccache_fp_f64(&mut *self.fp, v) };
        self
    }

    /// Appends bytes (their contents, never their address).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // SAFETY: b is valid for its length during the call.
        unsafe { ffi::ccache_fp_bytes(&mut *self.fp, b.as_ptr().cast(), b.len()) };
        self
    }

    /// Appends a string (tagged apart from bytes: `str("ab")` differs from `bytes(b"ab")`).
    pub fn str(&mut self, s: &str) -> &mut Self {
        // SAFETY: s is valid for its length during the call.
        unsafe { ffi::ccache_fp_str(&mut *self.fp, s.as_ptr() as *const c_char, s.len()) };
        self
    }

    /// Appends a tensor type: the runtime's dtype code and the dims (rank
    /// `dims.len()`, at most 16, else the builder is poisoned).
    pub fn shape(&mut self, dtype: i32, dims: &[i64]) -> &mut Self {
        let rank = u32::try_from(dims.len()).unwrap_or(u32::MAX);
        let p = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        // SAFETY: p is valid for rank dims (rank over 16 is refused before reading).
        unsafe { ffi::ccache_fp_shape(&mut *self.fp, dtype, rank, p) };
        self
    }

    /// Appends a key (its own tag), e.g. the program key a closure key
    /// must include.
    pub fn key(&mut self, k: Key) -> &mut Self {
        // SAFETY: an initialised builder.
        unsafe { ffi::ccache_fp_key(&mut *self.fp, k.into()) };
        self
    }

    /// The key of everything appended so far (the builder may go on).
    /// `EINVAL` if an append failed.
    pub fn finish(&self) -> Result<Key, Status> {
        let mut k = ffi::ccache_key::default();
        // SAFETY: reads the builder, writes k.
        check(unsafe { ffi::ccache_fp_final(&*self.fp, &mut k) })?;
        Ok(k.into())
    }
}

/// The strong builder: the same fields and encoding as [`Fingerprint`],
/// hashed with BLAKE2b-256, finished into a [`StrongKey`] for a
/// [`crate::StrongCache`].  Needs a library with libsodium (the crate's
/// `trust` feature for a bundled build): without it [`StrongFingerprint::finish`]
/// is `ENOTSUP`.
///
/// ```
/// use ccache::{StrongFingerprint, Trust};
/// let mut fp = StrongFingerprint::new();
/// fp.str("matmul").shape(1, &[128, 576]).str("cpu");
/// match fp.finish() {
///     Ok(k) => assert_ne!(k.check, ccache::Key::default()),
///     Err(e) => assert!(!Trust::available() && e.code() == ccache::Status::ENOTSUP),
/// }
/// ```
#[derive(Clone)]
pub struct StrongFingerprint {
    fp: Box<ffi::ccache_fp>,
    init: i32,
}

impl Default for StrongFingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl StrongFingerprint {
    /// A fresh strong builder.
    pub fn new() -> StrongFingerprint {
        let mut fp = Box::new(ffi::ccache_fp { opaque_: [0; 1024] });
        // SAFETY: a caller-owned builder of the right size and alignment.
        let init = unsafe { ffi::ccache_fp_init_strong(&mut *fp) };
        StrongFingerprint { fp, init }
    }

    /// As [`Fingerprint::u64`].
    pub fn u64(&mut self, v: u64) -> &mut Self {
        // SAFETY: an initialised (or refusing) builder.
        unsafe { ffi::ccache_fp_u64(&mut *self.fp, v) };
        self
    }
    /// As [`Fingerprint::i64`].
    pub fn i64(&mut self, v: i64) -> &mut Self {
        // SAFETY: as above.
        unsafe { ffi::ccache_fp_i64(&mut *self.fp, v) };
        self
    }
    /// As [`Fingerprint::f64`].
    pub fn f64(&mut self, v: f64) -> &mut Self {
        // SAFETY: as above.
        unsafe { ffi::ccache_fp_f64(&mut *self.fp, v) };
        self
    }
    /// As [`Fingerprint::bytes`].
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // SAFETY: b is valid for its length during the call.
        unsafe { ffi::ccache_fp_bytes(&mut *self.fp, b.as_ptr().cast(), b.len()) };
        self
    }
    /// As [`Fingerprint::str`].
    pub fn str(&mut self, s: &str) -> &mut Self {
        // SAFETY: s is valid for its length during the call.
        unsafe { ffi::ccache_fp_str(&mut *self.fp, s.as_ptr() as *const c_char, s.len()) };
        self
    }
    /// As [`Fingerprint::shape`].
    pub fn shape(&mut self, dtype: i32, dims: &[i64]) -> &mut Self {
        let rank = u32::try_from(dims.len()).unwrap_or(u32::MAX);
        let p = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        // SAFETY: p is valid for rank dims (rank over 16 is refused before reading).
        unsafe { ffi::ccache_fp_shape(&mut *self.fp, dtype, rank, p) };
        self
    }
    /// As [`Fingerprint::key`] (a fast key as a field, e.g. a runtime's id).
    pub fn key(&mut self, k: Key) -> &mut Self {
        // SAFETY: as above.
        unsafe { ffi::ccache_fp_key(&mut *self.fp, k.into()) };
        self
    }
    /// The strong key of everything appended so far.  `EINVAL` if an append
    /// failed; `ENOTSUP` without libsodium.
    pub fn finish(&self) -> Result<StrongKey, Status> {
        check(self.init)?;
        let mut k = ffi::ccache_strong_key::default();
        // SAFETY: reads the builder, writes k.
        check(unsafe { ffi::ccache_fp_final_strong(&*self.fp, &mut k) })?;
        Ok(k.into())
    }
}

/// A node's op, by name or by numeric id (the name "3" and the id 3 differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// An op name (no NUL byte: one is `EINVAL`).
    Name(&'a str),
    /// A numeric op id.
    Id(u64),
}

/// An operand or output: output slot `slot` of node `node` (an index into the node slice).
#[repr(C)] // as ccache_fp_ref: the graph builder passes a slice of them to C
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ref {
    /// Index of the node.
    pub node: u32,
    /// Output slot of that node.
    pub slot: u32,
}

/// One output slot's tensor type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorType<'a> {
    /// The runtime's dtype code.
    pub dtype: i32,
    /// Dims (rank at most 16).
    pub dims: &'a [i64],
}

/// One node of a graph for [`graph_key`].  What enters its digest: the op,
/// the attribute bytes, the output types, the operands' digests in order,
/// the constant's bytes and the parameter position; never the node's index
/// or any address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node<'a> {
    /// The op.
    pub op: Op<'a>,
    /// Attribute bytes, serialised by the runtime.
    pub attrs: &'a [u8],
    /// Output slots.
    pub outputs: &'a [TensorType<'a>],
    /// Operands, each naming an earlier node.
    pub operands: &'a [Ref],
    /// Constant bytes (weights baked in), or `None` (differs from `Some(&[])`).
    pub constant: Option<&'a [u8]>,
    /// `Some(i)`: graph input number `i`.
    pub param: Option<u64>,
}

/// Structural (Merkle) key of a graph: only what an output depends on enters
/// it, plus every parameter node.  Nodes are topologically ordered (operands
/// point to earlier nodes).  Errors: `EINVAL` (a forward or out-of-range
/// operand or output, a rank over 16, no outputs, a NUL in an op name or the
/// device).
///
/// ```
/// use ccache::{graph_key, Node, Op, Ref, TensorType};
/// let t = [TensorType { dtype: 1, dims: &[4] }];
/// let x = Node { op: Op::Name("param"), attrs: &[], outputs: &t, operands: &[], constant: None, param: Some(0) };
/// let relu = Node { op: Op::Name("relu"), attrs: &[], outputs: &t, operands: &[Ref { node: 0, slot: 0 }], constant: None, param: None };
/// let key = graph_key(&[x, relu], &[Ref { node: 1, slot: 0 }], "cpu").unwrap();
/// assert_ne!(key, graph_key(&[x, relu], &[Ref { node: 1, slot: 0 }], "gpu").unwrap());
/// ```
pub fn graph_key(nodes: &[Node<'_>], outputs: &[Ref], device: &str) -> Result<Key, Status> {
    let g = RawGraph::new(nodes, outputs, device)?;
    let mut scratch = vec![ffi::ccache_key::default(); nodes.len().max(1)];
    let mut key = ffi::ccache_key::default();
    // SAFETY: every pointer is valid for its count during the call; scratch
    // holds n_nodes keys.
    check(unsafe {
        ffi::ccache_fp_graph(
            g.nodes.as_ptr(),
            g.nodes.len(),
            g.outputs.as_ptr(),
            g.outputs.len(),
            g.device.as_ptr(),
            scratch.as_mut_ptr(),
            &mut key,
        )
    })?;
    Ok(key.into())
}

/// [`graph_key`] with BLAKE2b-256 throughout, for a [`crate::StrongCache`]:
/// the same nodes, rules and invariances.  Errors as [`graph_key`], and
/// `ENOTSUP` without libsodium.
pub fn graph_key_strong(nodes: &[Node<'_>], outputs: &[Ref], device: &str) -> Result<StrongKey, Status> {
    let g = RawGraph::new(nodes, outputs, device)?;
    let mut scratch = vec![ffi::ccache_strong_key::default(); nodes.len().max(1)];
    let mut key = ffi::ccache_strong_key::default();
    // SAFETY: as graph_key, with strong keys.
    check(unsafe {
        ffi::ccache_fp_graph_strong(
            g.nodes.as_ptr(),
            g.nodes.len(),
            g.outputs.as_ptr(),
            g.outputs.len(),
            g.device.as_ptr(),
            scratch.as_mut_ptr(),
            &mut key,
        )
    })?;
    Ok(key.into())
}

/// The C view of a graph: the nodes point into `names`, `tensors` and
/// `operands`, kept alive beside them.
struct RawGraph {
    nodes: Vec<ffi::ccache_fp_node>,
    outputs: Vec<ffi::ccache_fp_ref>,
    device: CString,
    _names: Vec<Option<CString>>,
    _tensors: Vec<Vec<ffi::ccache_fp_tensor>>,
    _operands: Vec<Vec<ffi::ccache_fp_ref>>,
}

impl RawGraph {
    fn new(nodes: &[Node<'_>], outputs: &[Ref], device: &str) -> Result<RawGraph, Status> {
        let einval = || Status::from_code(Status::EINVAL);
        let device = CString::new(device).map_err(|_| einval())?;
        let mut names = Vec::with_capacity(nodes.len());
        for n in nodes {
            names.push(match n.op {
                Op::Name(s) => Some(CString::new(s).map_err(|_| einval())?),
                Op::Id(_) => None,
            });
        }
        let tensors: Vec<Vec<ffi::ccache_fp_tensor>> = nodes
            .iter()
            .map(|n| {
                n.outputs
                    .iter()
                    .map(|t| ffi::ccache_fp_tensor {
                        dtype: t.dtype,
                        rank: u32::try_from(t.dims.len()).unwrap_or(u32::MAX),
                        dims: if t.dims.is_empty() { ptr::null() } else { t.dims.as_ptr() },
                    })
                    .collect()
            })
            .collect();
        let operands: Vec<Vec<ffi::ccache_fp_ref>> = nodes
            .iter()
            .map(|n| n.operands.iter().map(|r| ffi::ccache_fp_ref { node: r.node, slot: r.slot }).collect())
            .collect();
        let mut raw = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let (op_name, op_id) = match (&names[i], n.op) {
                (Some(s), _) => (s.as_ptr(), 0),
                (None, Op::Id(id)) => (ptr::null(), id),
                (None, Op::Name(_)) => unreachable!(),
            };
            raw.push(ffi::ccache_fp_node {
                op_name,
                op_id,
                attrs: n.attrs.as_ptr().cast(),
                attrs_len: n.attrs.len(),
                outputs: tensors[i].as_ptr(),
                n_outputs: u32::try_from(tensors[i].len()).map_err(|_| einval())?,
                n_operands: u32::try_from(operands[i].len()).map_err(|_| einval())?,
                operands: operands[i].as_ptr(),
                constant: n.constant.map_or(ptr::null(), |c| c.as_ptr().cast()),
                constant_len: n.constant.map_or(0, |c| c.len()),
                param_index: match n.param {
                    Some(i) => i64::try_from(i).map_err(|_| einval())?,
                    None => -1,
                },
            });
        }
        let outs: Vec<ffi::ccache_fp_ref> = outputs.iter().map(|r| ffi::ccache_fp_ref { node: r.node, slot: r.slot }).collect();
        Ok(RawGraph { nodes: raw, outputs: outs, device, _names: names, _tensors: tensors, _operands: operands })
    }
}
