//! Fork-join round trip: our pool vs rayon's external broadcast vs `std::thread::scope`.

use crate::Section;

/// Measures the empty fork-join round trip at each thread count.
pub fn measure(thread_counts: &[usize]) -> Section {
    let _ = thread_counts;
    Section::default()
}
