"""What people see of an explanation: maps with their colour bars, and reports of a session."""
