"""``python -m dtfbench.ec2_types``: the EC2 type table as markdown (the code: ``dtfbench.plan.ec2_types``)."""

from dtfbench.plan.ec2_types import markdown_table

if __name__ == "__main__":
    print(markdown_table())
