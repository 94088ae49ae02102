//! A `.gguf` header as bytes: parsed, turned into a workload, validated and keyed.
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use model_workload::{GgufHeader, Workload};

fuzz_target!(|data: &[u8]| {
    let Ok(header) = GgufHeader::from_bytes(data) else {
        return;
    };
    let Ok(workload) = Workload::from_gguf_header(&header) else {
        return;
    };
    let _ = workload.validate();
    let _ = (workload.key(), workload.formats());
    let _ = (
        workload.token_weight_bytes(),
        workload.distinct_matrix_bytes(),
    );
    for projection in &workload.projections {
        let _ = (projection.mix_label(), projection.format_mix());
        let _ = projection.token_bytes();
    }
});
