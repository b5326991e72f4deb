"""Subcommands beyond export/inspect (replay, backends, demo); registered by cli.py."""


def add_commands(sub):
    pass
