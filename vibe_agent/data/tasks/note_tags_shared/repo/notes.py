"""A small notebook: notes with a title and tags."""


class Note:
    """One note. `tags` are labels such as "工作" or "读书"."""

    def __init__(self, title: str, tags: list[str] = []) -> None:
        self.title = title
        self.tags = tags

    def tag(self, label: str) -> None:
        """Add `label` unless the note has it already."""
        if label not in self.tags:
            self.tags.append(label)


class Notebook:
    """All notes, in the order they were added."""

    def __init__(self) -> None:
        self.notes: list[Note] = []

    def add(self, title: str) -> Note:
        """A new note without tags, added to the notebook."""
        note = Note(title)
        self.notes.append(note)
        return note

    def titles_tagged(self, label: str) -> list[str]:
        """Titles of the notes that carry `label`."""
        return [note.title for note in self.notes if label in note.tags]
