import sys, json, os, subprocess, numpy as np
sys.path.insert(0, 'unet'); import test_unet as t
def sh(*a):
    p = subprocess.run([sys.executable, *a], capture_output=True, text=True); print(p.stdout.strip(), p.stderr[-600:]); return p
t.synth('/tmp/c')
for d in ('g1', 'g2'):
    sh('unet/train.py', '--chips', '/tmp/c', '--out', '/tmp/' + d, '--device', 'cuda', '--bf16', '--base', '8', '--batch', '4', '--max-steps', '45', '--epochs', '20', '--patience', '20', '--lr', '3e-3')
a, b = (json.load(open(f'/tmp/{d}/model.json')) for d in ('g1', 'g2'))
print('cuda differs:', [k for k in a if a[k] != b[k]], a['validation_oa'][-1])
sh('unet/predict.py', '--model', '/tmp/g1', '--chips', '/tmp/c', '--tile', 'T1', '--out', '/tmp/p.npy', '--window', '32', '--overlap', '8', '--bf16')
x = np.load('/tmp/c/tiles/T1.npy'); y = np.load('/tmp/c/tiles/T1_y.npy'); pr = np.load('/tmp/p.npy'); s = (y > 0) & ~np.isnan(x).all(0)
print('cuda tile acc', (pr[s] == y[s]).mean())
# realistic size: 20 planes, 11 classes, 256 px chips, one 2048x2048 tile
os.makedirs('/tmp/big/tiles', exist_ok=True); r = np.random.default_rng(1)
N, C, S = 96, 20, 256
np.save('/tmp/big/x.npy', r.random((N, C, S, S), dtype=np.float32)); np.save('/tmp/big/y.npy', r.integers(0, 12, (N, S, S)).astype(np.uint8)); np.save('/tmp/big/split.npy', r.integers(0, 3, (N, S, S)).astype(np.uint8))
np.save('/tmp/big/tiles/B.npy', r.random((C, 2048, 2048), dtype=np.float32))
json.dump({'format': 'lulc-chips/1', 'planes': [f'p{i}' for i in range(C)], 'classes': [{'index': i + 1, 'code': i + 1, 'name': str(i)} for i in range(11)], 'tiles': [{'name': 'B', 'width': 2048, 'height': 2048}]}, open('/tmp/big/chips.json', 'w'))
for bf in ([], ['--bf16']):
    sh('unet/train.py', '--chips', '/tmp/big', '--out', '/tmp/bm', '--epochs', '3', '--batch', '16', *bf)
    print({k: v for k, v in json.load(open('/tmp/bm/model.json')).items() if k in ('peak_gpu_memory_bytes', 'train_pixels_per_s', 'device', 'torch', 'parameters')})
    sh('unet/predict.py', '--model', '/tmp/bm', '--chips', '/tmp/big', '--tile', 'B', '--out', '/tmp/bp.npy', '--batch', '16', *bf)
    print(json.load(open('/tmp/bp.json')))
