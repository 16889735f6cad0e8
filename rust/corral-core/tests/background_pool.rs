//! The background thread never starts rayon's pool (its own process: the pool is started
//! once per process, by whoever asks first). Started from the background thread, the pool's
//! threads would inherit its idle priority and its CPU placement, and every split walk of a
//! filling thread would wait on idle-priority helpers.

#[cfg(target_os = "linux")]
#[test]
fn the_background_thread_leaves_rayons_pool_to_ordinary_threads() {
    use std::sync::{Arc, Mutex};
    let asked: Arc<Mutex<Option<bool>>> = Arc::default();
    let a = asked.clone();
    if !corral_core::warmup::in_background(move || *a.lock().unwrap() = Some(corral_core::warmup::may_use_pool())) {
        return; // `CORRAL_BACKGROUND_WARMUP=0` in this environment: no background thread.
    }
    corral_core::warmup::wait_idle();
    assert_eq!(*asked.lock().unwrap(), Some(false), "the background thread does not split its work");
    // Started now, from this ordinary thread, the pool's threads run at ordinary priority:
    // the only thread under the idle policy (5) is the background thread.
    rayon::join(|| (), || ());
    let idle: Vec<String> = corral_core::testutil::thread_policies().into_iter().filter(|(_, p)| *p == 5).map(|(c, _)| c).collect();
    assert_eq!(idle, vec!["corral-warmup".to_string()], "threads under SCHED_IDLE: {idle:?}");
}
