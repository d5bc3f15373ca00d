"""GPU memory over consecutive stitch jobs in one app worker process (spawn): nvidia-smi's figure per job.

Run on a CUDA machine from the project root: `python bench/worker_memory_probe.py` (DEVICE=cuda, JOBS=10); writes
$OUT/mem_probe.json (OUT defaults to /tmp) and prints a JSON line per job.
"""
import json, os, subprocess, sys, tempfile, time
DEVICE = os.environ.get("DEVICE", "cuda")
JOBS = int(os.environ.get("JOBS", "10"))
sys.path.insert(0, os.getcwd())
from stitchcore.experiments.stitch import StitchSpec
from stitchcore.jobs.worker import WorkerProcess

def smi():
    if DEVICE == "cpu":
        return None
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip()
    return out

def main():
    store = tempfile.mkdtemp(prefix="memprobe-")
    w = WorkerProcess(store, threads=4)
    a = "timm:resnet18?pretrained=false&num_classes=10"
    rows = []
    for i in range(JOBS):
        spec = StitchSpec(a, a + "&seed=1", "layer2", "layer3" if i % 2 else "layer2", epochs=1, seed=i,
                          dataset="digits", max_train=512, max_test=256)
        t0 = time.time()
        msg = w.run("stitch", spec, rerun=True, device=DEVICE, on_progress=lambda f, m: None,
                    on_points=lambda s, p: None)
        rows.append({"job": i, "status": msg[0], "seconds": round(time.time() - t0, 2),
                     "accuracy": msg[1].get("accuracy") if msg[0] == "done" else msg[1],
                     "device": msg[1].get("device") if msg[0] == "done" else None, "gpu_mib": smi(), "worker_pid": w.pid})
        print(json.dumps(rows[-1]), flush=True)
    w.stop()
    json.dump(rows, open(os.path.join(os.environ.get("OUT", "/tmp"), "mem_probe.json"), "w"), indent=1)

if __name__ == "__main__":
    main()
