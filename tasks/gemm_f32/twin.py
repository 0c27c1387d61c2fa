"""PyTorch twin of tasks/gemm_f32 (see scripts/vs-torch.py): C = A @ B for row-major float32
matrices, with PyTorch's default float32 matmul precision ("highest": no TF32, which the
task's tolerance would refuse)."""


def twin(A, B, M, N, K):
    return {"C": A.view(M, K) @ B.view(K, N)}
