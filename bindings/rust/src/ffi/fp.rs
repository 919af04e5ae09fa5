//! What `ccache/fp.h` declares: the fingerprint state, the graph's nodes,
//! references and tensors, and the fingerprint calls (part of
//! [`crate::ffi`]: see there).

use super::common::{ccache_key, ccache_strong_key};
use std::os::raw::{c_char, c_int, c_void};

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct ccache_fp {
    pub opaque_: [u8; 1024],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ccache_fp_ref {
    pub node: u32,
    pub slot: u32,
}

#[repr(C)]
pub struct ccache_fp_tensor {
    pub dtype: i32,
    pub rank: u32,
    pub dims: *const i64,
}

#[repr(C)]
pub struct ccache_fp_node {
    pub op_name: *const c_char,
    pub op_id: u64,
    pub attrs: *const c_void,
    pub attrs_len: usize,
    pub outputs: *const ccache_fp_tensor,
    pub n_outputs: u32,
    pub n_operands: u32,
    pub operands: *const ccache_fp_ref,
    pub constant: *const c_void,
    pub constant_len: usize,
    pub param_index: i64,
}

extern "C" {
    pub fn ccache_fp_key(fp: *mut ccache_fp, key: ccache_key) -> c_int;
    pub fn ccache_fp_init_strong(fp: *mut ccache_fp) -> c_int;
    pub fn ccache_fp_final_strong(fp: *const ccache_fp, out: *mut ccache_strong_key) -> c_int;
    pub fn ccache_fp_graph_strong(
        nodes: *const ccache_fp_node,
        n_nodes: usize,
        outputs: *const ccache_fp_ref,
        n_outputs: usize,
        device: *const c_char,
        scratch: *mut ccache_strong_key,
        out: *mut ccache_strong_key,
    ) -> c_int;

    pub fn ccache_fp_init(fp: *mut ccache_fp);
    pub fn ccache_fp_u64(fp: *mut ccache_fp, v: u64) -> c_int;
    pub fn ccache_fp_i64(fp: *mut ccache_fp, v: i64) -> c_int;
    pub fn ccache_fp_f64(fp: *mut ccache_fp, v: f64) -> c_int;
    pub fn ccache_fp_bytes(fp: *mut ccache_fp, data: *const c_void, len: usize) -> c_int;
    pub fn ccache_fp_str(fp: *mut ccache_fp, s: *const c_char, len: usize) -> c_int;
    pub fn ccache_fp_shape(fp: *mut ccache_fp, dtype: i32, rank: u32, dims: *const i64) -> c_int;
    pub fn ccache_fp_final(fp: *const ccache_fp, out: *mut ccache_key) -> c_int;
    pub fn ccache_fp_graph(
        nodes: *const ccache_fp_node,
        n_nodes: usize,
        outputs: *const ccache_fp_ref,
        n_outputs: usize,
        device: *const c_char,
        scratch: *mut ccache_key,
        out: *mut ccache_key,
    ) -> c_int;
}
