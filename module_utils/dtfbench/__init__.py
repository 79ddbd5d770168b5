# dtfbench's standard-library-only subpackages, as Ansible ships them to modules:
# ansible.module_utils.dtfbench.<plan|launch|node|linux|results>.<module>. Each entry here is
# a folder link to src/dtfbench/<subpackage>; inside them imports are relative, so the same
# files work as the installed package (dtfbench.*) and as module_utils.
