"""Helpers shared by the tests: TLS material, scripted gRPC servers, processes."""
