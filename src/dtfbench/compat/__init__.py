"""Code for the TF 1.x study stack: standalone files copied to the nodes, stdlib only, Python 2.7+."""
