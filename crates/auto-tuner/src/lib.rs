//! The auto-tuner: measure the machine once, remember the answer, hand it to the runtime.
#![deny(missing_docs)]

#[cfg(test)]
mod tests {
    #[test]
    fn links() {
        assert_eq!(
            threadpool::SchedulePolicy::from_id(0),
            Some(threadpool::SchedulePolicy::Static)
        );
    }
}
