"""The node graph of a canonical model (networkx)."""
import networkx as nx


def dag(specs):
    """A DiGraph of node names with an edge producer -> consumer for every value."""
    g = nx.DiGraph()
    made = {o: s.name for s in specs for o in s.outputs if o}
    for s in specs:
        g.add_node(s.name)
        for i in s.inputs:
            if i in made:
                g.add_edge(made[i], s.name)
    return g
