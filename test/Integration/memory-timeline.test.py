"""Checks a memory timeline's sums (used by memory-timeline.test)."""
import json
import sys

doc = json.load(open(sys.argv[1]))
for plan in doc["plans"]:
    n = plan["points"]
    cats = doc["categories"]
    assert all(len(plan["live_bytes"][c]) == n for c in cats), "a category has the wrong length"
    total = [sum(plan["live_bytes"][c][i] for c in cats) for i in range(n)]
    assert all(v >= 0 for c in cats for v in plan["live_bytes"][c]), "negative live bytes"
    assert max(total) == plan["peak_bytes"], (max(total), plan["peak_bytes"])
    assert total.index(max(total)) == plan["peak_point"]
    assert plan["arena_bytes"] >= plan["peak_bytes"]
    points = [p["point"] for p in plan["phases"]]
    assert points == sorted(points) and points[0] == 0
    line = (f"{plan['name']}: peak {plan['peak_bytes']} = max of the category sums; "
            f"arena {plan['arena_bytes']}")
    if plan["name"] == "planned":
        assert plan["arena_bytes"] <= doc["budget_bytes"]
        line += f" <= budget {doc['budget_bytes']}"
    print(line)
planned = doc["plans"][1]
print(f"planned: copies {max(planned['live_bytes']['copies'])} bytes at most "
      f"(the host parameter's prefetch)")
