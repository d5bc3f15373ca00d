"""Stitching: adapters that join a sender cut to a receiver cut, their fits, training and evaluation."""
