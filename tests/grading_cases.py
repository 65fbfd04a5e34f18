"""Graded cases of several-part answers, inequalities and matrices: (response, gold, answer type, correct).

Read by tests/unit/test_grading_parts.py (each case graded as stated) and tests/unit/test_grading_under_load.py
(the same verdicts idle and under load).
"""

CASES = [  # (response, gold, answer type, correct)
    ("So $\\boxed{(1, 2)}$, $\\boxed{(2, 1)}$.", "(1,2), (2,1)", "math", True),
    ("So $\\boxed{(2, 1)}$ and $\\boxed{(1, 2)}$.", "(1,2), (2,1)", "math", True),  # a set: any order
    ("So $\\boxed{(1, 2)}$.", "(1,2), (2,1)", "math", False),  # one part missing
    ("$\\boxed{k = 45}$ and $\\boxed{n = 2}$", "k=45, n=2", "math", True),
    ("$\\boxed{n = 2}$ and $\\boxed{k = 45}$", "k=45, n=2", "math", True),  # labels matched
    ("$\\boxed{k = 2}$ and $\\boxed{n = 45}$", "k=45, n=2", "math", False),
    ("$\\boxed{n = 45}$ and $\\boxed{n = 2}$", "k=45, n=2", "math", False),
    ("$\\boxed{45}$ and $\\boxed{2}$", "k=45, n=2", "math", True),  # unlabeled: the gold's order
    ("$\\boxed{2}$ and $\\boxed{45}$", "k=45, n=2", "math", False),
    ("\\boxed{f(n) = n}, \\boxed{g(n) = 1}", "f(n)=n, g(n)=1", "math", True),
    ("\\boxed{f(n) = 1}, \\boxed{g(n) = n}", "f(n)=n, g(n)=1", "math", False),
    ("\\boxed{1}, \\boxed{-2}", "1,-2", "math", True),
    ("\\boxed{\\{-2, 1\\}}", "1,-2", "math", True),
    ("\\boxed{1, -2, 1}", "1,-2", "math", True),  # a set of solutions: a solution listed twice
    ("\\boxed{1, -2, 3}", "1,-2", "math", False),  # another solution
    ("\\boxed{1, 1}", "1,-2", "math", False),  # a solution missing
    ("\\boxed{1, -2}", "1, 1, -2", "math", False),  # a gold that repeats a part is a list: its multiplicity counts
    ("\\boxed{1, -2, 1}", "1, 1, -2", "math", True),
    # parts that share a label: one set of values for that label
    ("\\boxed{f(x)=x,f(x)=-x}", "f(x)=x,f(x)=-x", "math", True),
    ("\\boxed{f(x)=-x}, \\boxed{f(x)=x}", "f(x)=x,f(x)=-x", "math", True),
    ("\\boxed{x=1 \\text{ or } x=2}", "x=1, x=2", "math", True),
    ("\\boxed{x = 2, x = 1}", "x=1, x=2", "math", True),
    ("\\boxed{2, 1}", "x=1, x=2", "math", True),  # unlabeled: the values of the gold's one label
    ("\\boxed{x=1, x=2}", "1, 2", "math", True),
    ("\\boxed{x=2, y=3}", "x=2, y=3", "math", True),
    ("\\boxed{f(x)=x, f(x)=x}", "f(x)=x, f(x)=-x", "math", False),  # no false accept
    ("\\boxed{x=1, x=3}", "x=1, x=2", "math", False),
    ("\\boxed{x=1, y=2}", "x=1, x=2", "math", False),  # another label
    # a set of solution pairs; the list type (OlympiadBench's multiple answers) counts every part
    ("\\boxed{(1,2),(1,2),(3,4)}", "(1,2),(3,4)", "math", True),
    ("\\boxed{(3,4),(1,2)}", "(1,2),(3,4)", "list", True),
    ("\\boxed{(1,2),(1,2),(3,4)}", "(1,2),(3,4)", "list", False),
    ("\\boxed{1}", "1,-2", "math", False),
    ("\\boxed{2}, \\boxed{3}, and \\boxed{4}", "2, 3, \\text{ and } 4", "math", True),
    ("\\boxed{69}, \\boxed{84}", "69, 84", "list", True),  # OlympiadBench is_multiple_answer
    ("\\boxed{84} \\text{ and } \\boxed{69}", "69, 84", "list", True),
    ("\\boxed{84}", "69, 84", "list", False),
    ("\\boxed{(1,8,19)}, \\boxed{(2,7,13)}, \\boxed{(4,5,7)}", "(1,8,19), (2,7,13), (4,5,7)", "list", True),
    ("\\boxed{(4,5,7), (1,8,19), (2,7,13)}", "(1,8,19), (2,7,13), (4,5,7)", "list", True),
    ("\\boxed{(1,8,19)}, \\boxed{(2,13,7)}, \\boxed{(4,5,7)}", "(1,8,19), (2,7,13), (4,5,7)", "list", False),
    ("\\boxed{1}, \\boxed{2}", "[1, 2]", "list", True),  # TheoremQA list, boxed part by part
    # a single-part gold still reads the last box only (the paper's oracle)
    ("\\boxed{3} \\text{ or } \\boxed{2}", "3", "math", False),
    ("\\boxed{2} \\text{ or } \\boxed{3}", "3", "math", True),
    ("\\boxed{10080}", "10,\\!080", "math", True),
    ("\\boxed{(\\frac{\\pi}{2}, 3)}", "\\left( 3, \\frac{\\pi}{2} \\right)", "math", False),  # a tuple keeps its order
    # inequalities and intervals
    ("\\boxed{x \\ge 5}", "x \\geq 5", "math", True),
    ("\\boxed{x >= 5}", "x \\geq 5", "math", True),
    ("\\boxed{[5, \\infty)}", "x \\geq 5", "math", True),
    ("\\boxed{x > 5}", "x \\geq 5", "math", False),
    ("\\boxed{(5, \\infty)}", "x \\geq 5", "math", False),
    ("\\boxed{x \\lt 5}", "x < 5", "math", True),
    ("\\boxed{x \\neq 5}", "x \\ne 5", "math", True),
    ("\\boxed{x \\neq 4}", "x \\ne 5", "math", False),
    ("\\boxed{-80 \\le g(x) \\le 82}", "-80\\leq g(x)\\leq 82", "math", True),
    # matrices
    ("\\boxed{\\begin{bmatrix} 1 & 0 \\\\ 0 & 1 \\end{bmatrix}}", "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}", "math", True),
    ("\\boxed{\\left[\\begin{array}{cc} 1 & 0 \\\\ 0 & 1 \\end{array}\\right]}",
     "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}", "math", True),
    ("\\boxed{\\begin{pmatrix} 1 & 0 \\\\ 1 & 1 \\end{pmatrix}}", "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}", "math", False),
    ("\\boxed{\\begin{pmatrix} -1 \\\\ 0 \\end{pmatrix}}", "\\begin{pmatrix} -1 & 0 \\end{pmatrix}", "math", False),
    ("\\boxed{\\begin{bmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\end{bmatrix}}", "\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}", "math", True),
]
