"""PyTorch twin of tasks/transpose (see scripts/vs-torch.py): out = in^T, materialised (a
rows x cols float32 matrix becomes cols x rows). The input is named `in`, a Python
keyword: hence **args."""


def twin(**args):
    rows, cols = args["rows"], args["cols"]
    return {"out": args["in"].view(rows, cols).t().contiguous()}
