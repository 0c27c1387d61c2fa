//! GPU lanes: one per GPU, each running one job at a time (a judgment, a profile, a final
//! check), so no two measurements ever share a GPU. Profiles jump the queue: a generator
//! is waiting on them. A job goes to the lane with the fewest jobs queued (in turn among
//! equals), and each lane keeps how long it was busy, for the GPU busy fraction the run
//! reports, and while it has no job, what it waits for ([`super::waits`]).

use super::waits::{IdleWaits, Stages, Wait};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// How often idle lanes book what they wait for.
const WAIT_TICK: Duration = Duration::from_millis(50);

type Work = Box<dyn FnOnce(usize) + Send>;

struct Job {
    what: String,
    work: Work,
}

#[derive(Debug, Clone, Default)]
pub struct LaneStats {
    pub device: usize,
    pub busy_s: f64,
    /// Busy seconds while the search ran (not the baseline judgment or the final check).
    pub search_busy_s: f64,
    pub jobs: usize,
    /// What the lane is doing now.
    pub current: Option<String>,
    /// What it waits for now, when it has no job.
    pub waiting: Option<Wait>,
    /// Idle seconds during the search, by what the lane waited for.
    pub idle: IdleWaits,
}

struct Lane {
    urgent: mpsc::UnboundedSender<Job>,
    normal: mpsc::UnboundedSender<Job>,
    queued: Arc<AtomicUsize>,
    stats: Arc<Mutex<LaneStats>>,
}

pub struct Lanes {
    lanes: Vec<Lane>,
    /// Where the search for the least loaded lane starts next.
    cursor: AtomicUsize,
    /// Whether the search is running (for the busy fraction of the search alone).
    search_phase: Arc<AtomicBool>,
}

impl Lanes {
    /// Starts one lane per device on the current tokio runtime; `stages` says where the
    /// expansions are, for what an idle lane waits for.
    pub fn start(devices: &[usize], stages: Arc<Stages>) -> Lanes {
        let mut lanes = Vec::new();
        let phase = Arc::new(AtomicBool::new(false));
        for &device in devices {
            let search_phase = phase.clone();
            let (urgent, mut urgent_rx) = mpsc::unbounded_channel::<Job>();
            let (normal, mut normal_rx) = mpsc::unbounded_channel::<Job>();
            let queued = Arc::new(AtomicUsize::new(0));
            let stats = Arc::new(Mutex::new(LaneStats { device, ..Default::default() }));
            let st = stats.clone();
            tokio::spawn(async move {
                loop {
                    let job = tokio::select! {
                        biased;
                        Some(j) = urgent_rx.recv() => j,
                        Some(j) = normal_rx.recv() => j,
                        else => break,
                    };
                    st.lock().unwrap().current = Some(job.what.clone());
                    let started = Instant::now();
                    let work = job.work;
                    let _ = tokio::task::spawn_blocking(move || work(device)).await;
                    let mut s = st.lock().unwrap();
                    let busy = started.elapsed().as_secs_f64();
                    s.busy_s += busy;
                    if search_phase.load(Ordering::SeqCst) {
                        s.search_busy_s += busy;
                    }
                    s.jobs += 1;
                    s.current = None;
                }
            });
            lanes.push(Lane { urgent, normal, queued, stats });
        }
        let watched: Vec<(Weak<Mutex<LaneStats>>, Arc<AtomicUsize>)> =
            lanes.iter().map(|l| (Arc::downgrade(&l.stats), l.queued.clone())).collect();
        tokio::spawn(book_waits(watched, stages, phase.clone()));
        Lanes { lanes, cursor: AtomicUsize::new(0), search_phase: phase }
    }

    /// Marks the start and end of the search, for [`LaneStats::search_busy_s`].
    pub fn set_search_phase(&self, on: bool) {
        self.search_phase.store(on, Ordering::SeqCst);
    }

    /// Runs `f(device)` on the least loaded lane; returns the lane index and the result.
    pub async fn run<T: Send + 'static>(
        &self,
        urgent: bool,
        what: String,
        f: impl FnOnce(usize) -> T + Send + 'static,
    ) -> Option<(usize, T)> {
        // The least loaded lane; among equals, the next after the last one chosen, so that
        // one job at a time still goes round every lane (a remote lane idle all night is
        // a GPU of the cluster nobody used).
        let n = self.lanes.len();
        let start = self.cursor.load(Ordering::SeqCst);
        let i = (0..n).map(|k| (start + k) % n).min_by_key(|&k| self.lanes[k].queued.load(Ordering::SeqCst))?;
        self.cursor.store(i + 1, Ordering::SeqCst);
        let lane = &self.lanes[i];
        let (tx, rx) = oneshot::channel();
        lane.queued.fetch_add(1, Ordering::SeqCst);
        // The count drops before the caller hears the result, so a caller that sends the
        // next job at once sees this lane free; and drops whatever happens to the job (it
        // panics, or is never run).
        let done = Dequeued(lane.queued.clone());
        let job = Job {
            what,
            work: Box::new(move |device| {
                let r = f(device);
                drop(done);
                let _ = tx.send(r);
            }),
        };
        let sent = if urgent { lane.urgent.send(job) } else { lane.normal.send(job) };
        if sent.is_err() {
            return None;
        }
        rx.await.ok().map(|r| (i, r))
    }

    pub fn stats(&self) -> Vec<LaneStats> {
        self.lanes.iter().map(|l| l.stats.lock().unwrap().clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    pub fn queued(&self) -> usize {
        self.lanes.iter().map(|l| l.queued.load(Ordering::SeqCst)).sum()
    }
}

/// Takes a job off its lane's count when dropped.
struct Dequeued(Arc<AtomicUsize>);

impl Drop for Dequeued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Books each idle lane's ticks to what it waits for, until the lanes are gone.
async fn book_waits(
    lanes: Vec<(Weak<Mutex<LaneStats>>, Arc<AtomicUsize>)>,
    stages: Arc<Stages>,
    search: Arc<AtomicBool>,
) {
    let mut tick = tokio::time::interval(WAIT_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    loop {
        tick.tick().await;
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        let queued: Vec<usize> = lanes.iter().map(|(_, q)| q.load(Ordering::SeqCst)).collect();
        let total: usize = queued.iter().sum();
        let mut alive = false;
        for ((stats, _), mine) in lanes.iter().zip(&queued) {
            let Some(stats) = stats.upgrade() else { continue };
            alive = true;
            let mut s = stats.lock().unwrap();
            if s.current.is_some() {
                s.waiting = None;
                continue;
            }
            let reason = stages.reason(total - mine);
            s.waiting = Some(reason);
            if search.load(Ordering::SeqCst) {
                *s.idle.entry(reason).or_default() += dt;
            }
        }
        if !alive {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::waits::Stage;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_lane_books_its_time_to_what_holds_the_work_back() {
        let stages = Arc::new(Stages::default());
        let lanes = Lanes::start(&[0], stages.clone());
        lanes.set_search_phase(true);
        let started = Instant::now();
        let in_build = {
            let _building = stages.enter(Stage::Build);
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(lanes.stats()[0].waiting, Some(Wait::Build));
            started.elapsed().as_secs_f64()
        };
        // A job on the lane: busy, not waiting, and not booked as idle.
        let job = Duration::from_millis(300);
        assert!(lanes.run(false, "job".into(), move |_| std::thread::sleep(job)).await.is_some());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let wall = started.elapsed().as_secs_f64();
        let s = &lanes.stats()[0];
        assert_eq!(s.waiting, Some(Wait::Search));
        // Sleeps stretch on a loaded machine, so the books are held against the clock, to
        // a few ticks.
        let slack = 3.0 * WAIT_TICK.as_secs_f64();
        let build = s.idle.get(&Wait::Build).copied().unwrap_or(0.0);
        assert!((build - in_build).abs() <= slack, "booked {build} s to builds, which took {in_build} s");
        let idle: f64 = s.idle.values().sum();
        assert!(idle <= wall - job.as_secs_f64() + slack, "idle {idle} s of {wall} s with a 0.3 s job: {:?}", s.idle);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_job_at_a_time_still_goes_round_every_lane() {
        let lanes = Lanes::start(&[0, 1, 2], Arc::new(Stages::default()));
        let mut used = Vec::new();
        for i in 0..6 {
            let (lane, device) = lanes.run(false, format!("job {i}"), |device| device).await.unwrap();
            assert_eq!(lane, device);
            used.push(lane);
        }
        assert_eq!(used, [0, 1, 2, 0, 1, 2], "idle lanes left unused: {used:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_job_at_a_time_per_lane_and_urgent_jobs_first() {
        let lanes = Arc::new(Lanes::start(&[7], Arc::new(Stages::default())));
        let order = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        // The first job holds the lane until the others are all queued behind it (a gate,
        // not a sleep: under a loaded CI machine, sleeps stretch).
        let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        for (i, urgent) in [(0, false), (1, false), (2, false), (3, true)] {
            let (lane_set, order, running, gate) = (lanes.clone(), order.clone(), running.clone(), gate.clone());
            handles.push(tokio::spawn(async move {
                lane_set
                    .run(urgent, format!("job {i}"), move |device| {
                        assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "two jobs on one lane at once");
                        if i == 0 {
                            let (open, cv) = &*gate;
                            let mut open = open.lock().unwrap();
                            while !*open {
                                open = cv.wait(open).unwrap();
                            }
                        }
                        std::thread::sleep(std::time::Duration::from_millis(if i == 0 { 250 } else { 20 }));
                        order.lock().unwrap().push(i);
                        running.fetch_sub(1, Ordering::SeqCst);
                        device
                    })
                    .await
            }));
            if i == 0 {
                while lanes.stats()[0].current.is_none() {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
        }
        // `queued` counts the running job too.
        while lanes.queued() < 4 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        {
            let (open, cv) = &*gate;
            *open.lock().unwrap() = true;
            cv.notify_all();
        }
        for h in handles {
            assert_eq!(h.await.unwrap().unwrap(), (0, 7));
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order[0], 0);
        assert_eq!(order[1], 3, "the urgent job overtook the queued ones: {order:?}");
        // The lane books a job just after handing its result over: wait for the books.
        for _ in 0..200 {
            if lanes.stats()[0].jobs == 4 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let s = &lanes.stats()[0];
        assert_eq!(s.jobs, 4);
        assert!(s.busy_s >= 0.25, "{}", s.busy_s);
    }
}
