"""Datasets: the normalized schema and the sets the workflow prepares."""
