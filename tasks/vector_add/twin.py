"""PyTorch twin of tasks/vector_add (see scripts/vs-torch.py): c = a + b, float32."""


def twin(a, b, n):
    return {"c": a + b}
