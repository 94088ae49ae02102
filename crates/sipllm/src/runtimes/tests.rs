//! Golden tests of every runtime form: each machine's profile (SMT, hybrid, NUMA; pinned and
//! not) rendered for every target, compared with the full expected text and notes.

use super::*;
use auto_tuner::AutoTunerOptions;
use threadpool::SchedulePolicy;

/// A machine of `logical` CPUs with the given cores and nodes.
fn machine(logical: usize, core_cpus: Vec<Vec<usize>>, node_cpus: Vec<Vec<usize>>) -> HardwareInfo {
    HardwareInfo {
        arch: "x86_64".into(),
        cpu_model: "Test CPU".into(),
        logical_cores: logical,
        physical_cores: core_cpus.len(),
        effective_cpus: logical,
        allowed_cpus: (0..logical).collect(),
        numa_nodes: node_cpus.len().max(1),
        core_cpus,
        node_cpus,
        ..HardwareInfo::default()
    }
}

/// Four cores with two SMT threads each, CPUs 0-3 first and their siblings 4-7.
fn smt_machine() -> HardwareInfo {
    machine(8, (0..4).map(|c| vec![c, c + 4]).collect(), Vec::new())
}

/// Six performance cores with SMT (CPUs 0-11, siblings adjacent) and eight efficiency
/// cores (CPUs 12-19), as on a Core i7-12700H.
fn hybrid_machine() -> HardwareInfo {
    let mut cores: Vec<Vec<usize>> = (0..6).map(|c| vec![2 * c, 2 * c + 1]).collect();
    cores.extend((12..20).map(|c| vec![c]));
    HardwareInfo {
        performance_cores: 6,
        efficiency_cores: 8,
        performance_cpus: (0..12).collect(),
        efficiency_cpus: (12..20).collect(),
        ..machine(20, cores, Vec::new())
    }
}

/// Two nodes of sixteen cores each, no SMT: node 0 has CPUs 0-15, node 1 CPUs 16-31.
fn numa_machine() -> HardwareInfo {
    machine(
        32,
        (0..32).map(|c| vec![c]).collect(),
        vec![(0..16).collect(), (16..32).collect()],
    )
}

/// A phase setting: `threads`, pinned to `cpus` as `cores` when `cpus` is not empty.
fn phase(threads: usize, cores: CoreSet, cpus: &[usize]) -> PhaseProfile {
    PhaseProfile {
        cores,
        pinned_cpus: cpus.to_vec(),
        ..PhaseProfile::unmeasured(threads, SchedulePolicy::Static)
    }
}

/// The profile of `hw` for llama3-8b with these decode and prefill settings.
fn profile(hw: &HardwareInfo, decode: PhaseProfile, prefill: PhaseProfile) -> RuntimeProfile {
    let request = AutoTunerOptions::default().question.request(hw);
    let mut p = RuntimeProfile::unmeasured(
        hw,
        request,
        matmul_kernel::Kernel::best(),
        1,
        SchedulePolicy::Static,
    );
    p.hardware_id = "test_machine".into();
    p.request.workload.name = "llama3-8b q4_K_M".into();
    p.decode = decode;
    p.prefill = prefill;
    p
}

/// Every target's text and notes, one block per target, as the goldens spell them.
fn every_form(p: &RuntimeProfile, hw: &HardwareInfo) -> String {
    let mut s = String::new();
    for settings in render_all(p, hw).unwrap() {
        let _ = writeln!(s, "== {}", settings.target);
        s.push_str(&settings.text);
        for note in &settings.notes {
            let _ = writeln!(s, "note: {note}");
        }
    }
    s
}

fn assert_golden(actual: &str, expected: &str) {
    assert!(
        actual == expected,
        "--- actual:\n{actual}\n--- expected:\n{expected}"
    );
}

#[test]
fn an_unpinned_profile_gives_thread_counts_only() {
    let hw = smt_machine();
    let p = profile(
        &hw,
        phase(4, CoreSet::Any, &[]),
        phase(8, CoreSet::Any, &[]),
    );
    let expected = "\
== llama.cpp
-t 4 -tb 8
== llama-server-preset
; sipllm profile of llama3-8b q4_K_M on test_machine
[*]
threads = 4
threads-batch = 8
== ollama
# sipllm profile of llama3-8b q4_K_M on test_machine
# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)
PARAMETER num_thread 4
note: ollama has one thread setting for both phases, so this is the decode pick (4 threads); the prefill pick (8 threads) is not expressible
== llama-cpp-python
# sipllm profile of llama3-8b q4_K_M on test_machine
N_THREADS=4
N_THREADS_BATCH=8
== candle
# sipllm profile of llama3-8b q4_K_M on test_machine
CANDLE_NUM_THREADS=4
RAYON_NUM_THREADS=4
note: candle has one thread setting for both phases, so this is the decode pick (4 threads); the prefill pick (8 threads) is not expressible
== vllm
# sipllm profile of llama3-8b q4_K_M on test_machine
VLLM_CPU_OMP_THREADS_BIND=nobind
OMP_NUM_THREADS=4
note: vLLM has one thread setting for both phases, so this is the decode pick (4 threads); the prefill pick (8 threads) is not expressible
";
    assert_golden(&every_form(&p, &hw), expected);
}

#[test]
fn equal_phases_need_no_note() {
    let hw = smt_machine();
    let p = profile(
        &hw,
        phase(2, CoreSet::Any, &[]),
        phase(2, CoreSet::Any, &[]),
    );
    for settings in render_all(&p, &hw).unwrap() {
        assert_eq!(settings.notes, Vec::<String>::new(), "{}", settings.target);
    }
    let ollama = render(Target::Ollama, &p, &hw).unwrap();
    assert_golden(
        &ollama.text,
        "# sipllm profile of llama3-8b q4_K_M on test_machine\n\
         # lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)\n\
         PARAMETER num_thread 2\n",
    );
}

#[test]
fn a_decode_pinned_to_physical_cores_gives_masks_and_cpu_lists() {
    let hw = smt_machine();
    let p = profile(
        &hw,
        phase(4, CoreSet::PhysicalCores, &[0, 1, 2, 3]),
        phase(8, CoreSet::Any, &[]),
    );
    let expected = "\
== llama.cpp
-t 4 -tb 8 -C 0xf --cpu-strict 1 -Cb 0xff --cpu-strict-batch 0
note: the unpinned prefill gets a mask of every CPU this process may use, not strict: llama.cpp's OpenMP build runs both phases on the same threads, which would otherwise keep the pinned phase's CPUs
== llama-server-preset
; sipllm profile of llama3-8b q4_K_M on test_machine
[*]
threads = 4
threads-batch = 8
cpu-mask = 0xf
cpu-strict = 1
cpu-mask-batch = 0xff
cpu-strict-batch = 0
note: the unpinned prefill gets a mask of every CPU this process may use, not strict: llama.cpp's OpenMP build runs both phases on the same threads, which would otherwise keep the pinned phase's CPUs
== ollama
# sipllm profile of llama3-8b q4_K_M on test_machine
# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)
PARAMETER num_thread 4
note: ollama has one thread setting for both phases, so this is the decode pick (4 threads pinned to CPUs 0-3 (physical_cores)); the prefill pick (8 threads) is not expressible
note: ollama sets no CPU affinity of its own: a systemd drop-in /etc/systemd/system/ollama.service.d/sipllm-cpus.conf of the lines `[Service]`, `AllowedCPUs=0-3` keeps decode on the CPUs it was tuned on; it confines the whole ollama service (every model), needs cgroup v2, and applies with `systemctl daemon-reload && systemctl restart ollama`
== llama-cpp-python
# sipllm profile of llama3-8b q4_K_M on test_machine
N_THREADS=4
N_THREADS_BATCH=4
note: llama-cpp-python sets no CPU affinity of its own: start it under `taskset -c 0-3` to keep decode on the CPUs it was tuned on (prompt processing then runs there too)
note: N_THREADS_BATCH is 4, not the prefill pick's 8: under that taskset the server has decode's 4 CPUs, and more threads than CPUs would share them
== candle
# sipllm profile of llama3-8b q4_K_M on test_machine
CANDLE_NUM_THREADS=4
RAYON_NUM_THREADS=4
note: candle has one thread setting for both phases, so this is the decode pick (4 threads pinned to CPUs 0-3 (physical_cores)); the prefill pick (8 threads) is not expressible
note: candle sets no CPU affinity of its own: start it under `taskset -c 0-3` to keep decode on the CPUs it was tuned on (prompt processing then runs there too)
== vllm
# sipllm profile of llama3-8b q4_K_M on test_machine
VLLM_CPU_OMP_THREADS_BIND=0-3
OMP_NUM_THREADS=4
note: vLLM has one thread setting for both phases, so this is the decode pick (4 threads pinned to CPUs 0-3 (physical_cores)); the prefill pick (8 threads) is not expressible
note: vLLM binds one OpenMP thread to each listed CPU (the list sets the count, OMP_NUM_THREADS repeats it)
";
    assert_golden(&every_form(&p, &hw), expected);
}

#[test]
fn a_hybrid_profile_pinned_to_the_performance_cores() {
    let hw = hybrid_machine();
    let p = profile(
        &hw,
        phase(6, CoreSet::Performance, &[0, 2, 4, 6, 8, 10]),
        phase(
            12,
            CoreSet::Performance,
            &[0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11],
        ),
    );
    let expected = "\
== llama.cpp
-t 6 -tb 12 -C 0x555 --cpu-strict 1 -Cb 0xfff --cpu-strict-batch 1
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
== llama-server-preset
; sipllm profile of llama3-8b q4_K_M on test_machine
[*]
threads = 6
threads-batch = 12
cpu-mask = 0x555
cpu-strict = 1
cpu-mask-batch = 0xfff
cpu-strict-batch = 1
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
== ollama
# sipllm profile of llama3-8b q4_K_M on test_machine
# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)
PARAMETER num_thread 6
note: ollama has one thread setting for both phases, so this is the decode pick (6 threads pinned to CPUs 0,2,4,6,8,10 (performance)); the prefill pick (12 threads pinned to CPUs 0-11 (performance)) is not expressible
note: ollama sets no CPU affinity of its own: a systemd drop-in /etc/systemd/system/ollama.service.d/sipllm-cpus.conf of the lines `[Service]`, `AllowedCPUs=0,2,4,6,8,10` keeps decode on the CPUs it was tuned on; it confines the whole ollama service (every model), needs cgroup v2, and applies with `systemctl daemon-reload && systemctl restart ollama`
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
== llama-cpp-python
# sipllm profile of llama3-8b q4_K_M on test_machine
N_THREADS=6
N_THREADS_BATCH=6
note: llama-cpp-python sets no CPU affinity of its own: start it under `taskset -c 0,2,4,6,8,10` to keep decode on the CPUs it was tuned on (prompt processing then runs there too)
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
note: N_THREADS_BATCH is 6, not the prefill pick's 12: under that taskset the server has decode's 6 CPUs, and more threads than CPUs would share them
== candle
# sipllm profile of llama3-8b q4_K_M on test_machine
CANDLE_NUM_THREADS=6
RAYON_NUM_THREADS=6
note: candle has one thread setting for both phases, so this is the decode pick (6 threads pinned to CPUs 0,2,4,6,8,10 (performance)); the prefill pick (12 threads pinned to CPUs 0-11 (performance)) is not expressible
note: candle sets no CPU affinity of its own: start it under `taskset -c 0,2,4,6,8,10` to keep decode on the CPUs it was tuned on (prompt processing then runs there too)
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
== vllm
# sipllm profile of llama3-8b q4_K_M on test_machine
VLLM_CPU_OMP_THREADS_BIND=0,2,4,6,8,10
OMP_NUM_THREADS=6
note: vLLM has one thread setting for both phases, so this is the decode pick (6 threads pinned to CPUs 0,2,4,6,8,10 (performance)); the prefill pick (12 threads pinned to CPUs 0-11 (performance)) is not expressible
note: vLLM binds one OpenMP thread to each listed CPU (the list sets the count, OMP_NUM_THREADS repeats it)
note: the performance-core pick leaves the efficiency cores (CPUs 12-19) to other work
";
    assert_golden(&every_form(&p, &hw), expected);
}

#[test]
fn a_hybrid_profile_left_unpinned_says_nothing_of_the_core_classes() {
    let hw = hybrid_machine();
    let p = profile(
        &hw,
        phase(8, CoreSet::Any, &[]),
        phase(8, CoreSet::Any, &[]),
    );
    let expected = "\
== llama.cpp
-t 8 -tb 8
== llama-server-preset
; sipllm profile of llama3-8b q4_K_M on test_machine
[*]
threads = 8
threads-batch = 8
== ollama
# sipllm profile of llama3-8b q4_K_M on test_machine
# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)
PARAMETER num_thread 8
== llama-cpp-python
# sipllm profile of llama3-8b q4_K_M on test_machine
N_THREADS=8
N_THREADS_BATCH=8
== candle
# sipllm profile of llama3-8b q4_K_M on test_machine
CANDLE_NUM_THREADS=8
RAYON_NUM_THREADS=8
== vllm
# sipllm profile of llama3-8b q4_K_M on test_machine
VLLM_CPU_OMP_THREADS_BIND=nobind
OMP_NUM_THREADS=8
";
    assert_golden(&every_form(&p, &hw), expected);
}

#[test]
fn both_phases_on_one_numa_node_bind_threads_and_memory_there() {
    let hw = numa_machine();
    let node0: Vec<usize> = (0..16).collect();
    let p = profile(
        &hw,
        phase(8, CoreSet::Node(0), &node0[..8]),
        phase(16, CoreSet::Node(0), &node0),
    );
    let expected = "\
== llama.cpp
-t 8 -tb 16 -C 0xff --cpu-strict 1 -Cb 0xffff --cpu-strict-batch 1
note: for the weights in node 0's memory, start llama.cpp under `numactl --membind=0`; --numa numactl is not written: at each graph it moves every thread to the process's whole CPU set, undoing the masks
== llama-server-preset
; sipllm profile of llama3-8b q4_K_M on test_machine
[*]
threads = 8
threads-batch = 16
cpu-mask = 0xff
cpu-strict = 1
cpu-mask-batch = 0xffff
cpu-strict-batch = 1
note: for the weights in node 0's memory, start llama.cpp under `numactl --membind=0`; --numa numactl is not written: at each graph it moves every thread to the process's whole CPU set, undoing the masks
== ollama
# sipllm profile of llama3-8b q4_K_M on test_machine
# lines of a Modelfile: put them after its FROM line (FROM ./model.gguf, say)
PARAMETER num_thread 8
note: ollama has one thread setting for both phases, so this is the decode pick (8 threads pinned to CPUs 0-7 (node0)); the prefill pick (16 threads pinned to CPUs 0-15 (node0)) is not expressible
note: ollama sets no CPU affinity of its own: a systemd drop-in /etc/systemd/system/ollama.service.d/sipllm-cpus.conf of the lines `[Service]`, `AllowedCPUs=0-7`, `AllowedMemoryNodes=0` keeps decode on the CPUs it was tuned on; it confines the whole ollama service (every model), needs cgroup v2, and applies with `systemctl daemon-reload && systemctl restart ollama`
== llama-cpp-python
# sipllm profile of llama3-8b q4_K_M on test_machine
N_THREADS=8
N_THREADS_BATCH=16
NUMA=3
note: NUMA=3 is ggml's numactl strategy: start the server under `numactl --cpunodebind=0 --membind=0`; its threads then share node 0's CPUs, not one CPU each as tuned
== candle
# sipllm profile of llama3-8b q4_K_M on test_machine
CANDLE_NUM_THREADS=8
RAYON_NUM_THREADS=8
note: candle has one thread setting for both phases, so this is the decode pick (8 threads pinned to CPUs 0-7 (node0)); the prefill pick (16 threads pinned to CPUs 0-15 (node0)) is not expressible
note: candle sets no CPU affinity of its own: start it under `taskset -c 0-7` to keep decode on the CPUs it was tuned on (prompt processing then runs there too)
== vllm
# sipllm profile of llama3-8b q4_K_M on test_machine
VLLM_CPU_OMP_THREADS_BIND=0-7
OMP_NUM_THREADS=8
note: vLLM has one thread setting for both phases, so this is the decode pick (8 threads pinned to CPUs 0-7 (node0)); the prefill pick (16 threads pinned to CPUs 0-15 (node0)) is not expressible
note: vLLM binds one OpenMP thread to each listed CPU (the list sets the count, OMP_NUM_THREADS repeats it)
";
    assert_golden(&every_form(&p, &hw), expected);
}

#[test]
fn a_node_for_decode_only_gives_prefill_every_cpu_and_numa_as_a_note() {
    let hw = numa_machine();
    let node1: Vec<usize> = (16..24).collect();
    let p = profile(
        &hw,
        phase(8, CoreSet::Node(1), &node1),
        phase(32, CoreSet::Any, &[]),
    );
    let llama = render(Target::LlamaCpp, &p, &hw).unwrap();
    assert_golden(
        &llama.text,
        "-t 8 -tb 32 -C 0xff0000 --cpu-strict 1 -Cb 0xffffffff --cpu-strict-batch 0\n",
    );
    assert_eq!(
        llama.notes,
        [
            "the unpinned prefill gets a mask of every CPU this process may use, not strict: \
             llama.cpp's OpenMP build runs both phases on the same threads, which would \
             otherwise keep the pinned phase's CPUs",
            "for the weights in node 1's memory, start llama.cpp under `numactl --membind=1`; \
             --numa numactl is not written: at each graph it moves every thread to the \
             process's whole CPU set, undoing the masks"
        ]
    );
    let python = render(Target::LlamaCppPython, &p, &hw).unwrap();
    assert_golden(
        &python.text,
        "# sipllm profile of llama3-8b q4_K_M on test_machine\nN_THREADS=8\nN_THREADS_BATCH=8\n",
    );
    let ollama = render(Target::Ollama, &p, &hw).unwrap();
    assert!(
        ollama.notes[1].contains(
            "of the lines `[Service]`, `AllowedCPUs=16-23`, `AllowedMemoryNodes=1` keeps decode"
        ),
        "{:?}",
        ollama.notes
    );
    // The Modelfile text holds Modelfile lines only: ollama's parser stops at `[Service]`.
    assert!(
        ollama
            .text
            .lines()
            .all(|l| l.starts_with('#') || l.starts_with("PARAMETER ")),
        "{}",
        ollama.text
    );
}

#[test]
fn a_prefill_pinned_alone_gives_decode_every_cpu_and_is_named_where_it_is_lost() {
    let hw = hybrid_machine();
    let p = profile(
        &hw,
        phase(8, CoreSet::Any, &[]),
        phase(12, CoreSet::Performance, &(0..12).collect::<Vec<_>>()),
    );
    let llama = render(Target::LlamaCpp, &p, &hw).unwrap();
    assert_golden(
        &llama.text,
        "-t 8 -tb 12 -C 0xfffff --cpu-strict 0 -Cb 0xfff --cpu-strict-batch 1\n",
    );
    assert!(
        llama.notes[0].starts_with("the unpinned decode gets a mask of every CPU"),
        "{:?}",
        llama.notes
    );
    // No mask in llama-cpp-python: the pin is said to be lost, and no note claims the
    // efficiency cores are left free.
    let python = render(Target::LlamaCppPython, &p, &hw).unwrap();
    assert_eq!(
        python.notes,
        [
            "llama-cpp-python sets no CPU affinity of its own, so the prefill pick (12 threads \
             pinned to CPUs 0-11 (performance)) runs unpinned"
        ]
    );
}

#[test]
fn a_one_thread_decode_and_a_list_across_nodes_are_named() {
    let hw = numa_machine();
    let p = profile(
        &hw,
        phase(1, CoreSet::PhysicalCores, &[3]),
        phase(1, CoreSet::PhysicalCores, &[3]),
    );
    let llama = render(Target::LlamaCpp, &p, &hw).unwrap();
    assert_golden(
        &llama.text,
        "-t 1 -tb 1 -C 0x8 --cpu-strict 1 -Cb 0x8 --cpu-strict-batch 1\n",
    );
    assert_eq!(
        llama.notes,
        [
            "llama.cpp runs a one-thread graph on the calling thread, which its masks do not \
          pin: the CPU of each phase holds only under `taskset -c`"
        ]
    );
    // A one-thread prefill pinned alone is named too.
    let p = profile(
        &hw,
        phase(4, CoreSet::Any, &[]),
        phase(1, CoreSet::PhysicalCores, &[3]),
    );
    let llama = render(Target::LlamaCpp, &p, &hw).unwrap();
    assert!(
        llama.notes.iter().any(|n| n.ends_with(
            "not pin: prefill's CPU holds only under `taskset -c`, which confines decode too"
        )),
        "{:?}",
        llama.notes
    );
    let across: Vec<usize> = (12..20).collect();
    let p = profile(
        &hw,
        phase(8, CoreSet::PhysicalCores, &across),
        phase(8, CoreSet::PhysicalCores, &across),
    );
    let vllm = render(Target::Vllm, &p, &hw).unwrap();
    assert_eq!(
        vllm.notes[1],
        "the list spans NUMA nodes 0 and 1, where vLLM's CPU guide asks for each list within \
         one node"
    );
    // Nodes numbered with a gap are named by their own numbers.
    let gap = HardwareInfo {
        node_ids: vec![0, 5],
        ..hw.clone()
    };
    let vllm = render(Target::Vllm, &p, &gap).unwrap();
    assert!(
        vllm.notes[1].starts_with("the list spans NUMA nodes 0 and 5"),
        "{:?}",
        vllm.notes
    );
    // A mask past CPU 63 as llama.cpp parses it: bit i for CPU i, 64 bits and more.
    let high: Vec<usize> = (64..68).chain([127]).collect();
    let wide = machine(128, (0..128).map(|c| vec![c]).collect(), Vec::new());
    let p = profile(
        &wide,
        phase(5, CoreSet::PhysicalCores, &high),
        phase(5, CoreSet::PhysicalCores, &high),
    );
    let llama = render(Target::LlamaCpp, &p, &wide).unwrap();
    let mask = format!("0x8{}f{}", "0".repeat(14), "0".repeat(16));
    assert_golden(
        &llama.text,
        &format!("-t 5 -tb 5 -C {mask} --cpu-strict 1 -Cb {mask} --cpu-strict-batch 1\n"),
    );
}

#[test]
fn a_cpu_beyond_llama_cpp_masks_is_an_error_for_those_targets_only() {
    let hw = machine(1024, (0..1024).map(|c| vec![c]).collect(), Vec::new());
    let p = profile(
        &hw,
        phase(2, CoreSet::PhysicalCores, &[600, 601]),
        phase(2, CoreSet::Any, &[]),
    );
    for target in [Target::LlamaCpp, Target::LlamaServerPreset] {
        let err = render(target, &p, &hw).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{target}: the profile pins CPU 600, beyond the CPUs llama.cpp's masks reach \
                 (0-511, GGML_MAX_N_THREADS)"
            )
        );
    }
    assert!(render_all(&p, &hw).is_err());
    let vllm = render(Target::Vllm, &p, &hw).unwrap();
    assert!(
        vllm.text.contains("VLLM_CPU_OMP_THREADS_BIND=600-601\n"),
        "{}",
        vllm.text
    );
}

#[test]
fn masks_and_lists_spell_the_cpus() {
    assert_eq!(cpu_mask_hex(&[0]), "0x1");
    assert_eq!(cpu_mask_hex(&[3, 1, 0, 2]), "0xf");
    assert_eq!(cpu_mask_hex(&[4]), "0x10");
    assert_eq!(cpu_mask_hex(&[0, 63]), "0x8000000000000001");
    assert_eq!(cpu_mask_hex(&[511]), format!("0x8{}", "0".repeat(127)));
    assert_eq!(cpu_list(&[3, 0, 1, 2, 8]), "0-3,8");
    assert_eq!(cpu_list(&[5, 5, 7]), "5,7");
    assert_eq!(cpu_list(&[]), "");
}

#[test]
fn targets_parse_by_name_and_refuse_others() {
    for target in Target::ALL {
        assert_eq!(Target::parse(target.name()), Ok(target));
        assert!(!target.targets().is_empty());
    }
    assert_eq!(Target::parse(" OLLAMA "), Ok(Target::Ollama));
    assert_eq!(
        Target::parse("lmstudio"),
        Err(
            "unknown target \"lmstudio\": expected one of llama.cpp, llama-server-preset, \
             ollama, llama-cpp-python, candle, vllm"
                .to_string()
        )
    );
}

#[test]
fn the_docs_table_has_a_row_per_target_with_its_version() {
    let doc = include_str!("../../../../docs/runtimes.md");
    for target in Target::ALL {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", target.name())))
            .unwrap_or_else(|| panic!("docs/runtimes.md has no row for {target}"));
        // The version `targets()` names (its second word: `0c1e57098` of `llama.cpp
        // 0c1e57098: …`) is the one the row names.
        let version = target.targets().split_whitespace().nth(1).unwrap();
        let version = version.trim_end_matches(':');
        assert!(
            row.contains(version),
            "{target}: {version:?} not in {row:?}"
        );
    }
}

#[test]
fn a_name_from_a_file_reaches_no_emitted_file_raw() {
    // A GGUF's general.name with a direction override, an invisible space and a line break
    // that would start a directive of its own in a Modelfile.
    let hw = smt_machine();
    let mut p = profile(
        &hw,
        phase(2, CoreSet::Any, &[]),
        phase(2, CoreSet::Any, &[]),
    );
    p.request.workload.name = "tiny\u{202e}evil\u{200b}\nFROM attacker/model".into();
    for settings in render_all(&p, &hw).unwrap() {
        let text = &settings.text;
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{200b}'),
            "{}: {text:?}",
            settings.target
        );
        assert!(
            !text.lines().any(|l| l.starts_with("FROM")),
            "{}: {text:?}",
            settings.target
        );
    }
    let ollama = render(Target::Ollama, &p, &hw).unwrap();
    assert!(
        ollama.text.starts_with(
            "# sipllm profile of tiny\\u{202e}evil\\u{200b}\\nFROM attacker/model on "
        ),
        "{:?}",
        ollama.text
    );
}
