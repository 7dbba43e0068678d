"""Operations over the Engine: ACL users, bulk actions, agent drain, the console's
watch, the DAG as text (viz)."""
