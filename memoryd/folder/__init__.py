"""The memory folder: its layout, link-refusing file primitives, projects, audit, confinement,
validated copy, git baseline and rollback (see ARCHITECTURE.md, "The memory folder")."""
